package main

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"lemon/cmd/lemon/internal/sdkembed"
	"lemon/hostcalls"
)

const pluginNewUsage = `usage: lemon plugin new NAME [--dir DIR]

Scaffolds the method family NAME in DIR (default ./NAME): a Go module whose
example method node.NAME.echo {nodeId, message} -> {message} is declared in
its manifest, conformance cases, a README, and the plugin SDK this binary
carries (vendored under .lemon-sdk, so the module builds with no network).
NAME is 2 to 32 lowercase letters and digits, starting with a letter, and
not a first-party family, method namespace or capability.
`

// familyNameRE is the shape of a scaffolded family name: it becomes the
// Go module path, the method namespace node.NAME.* and the capability.
var familyNameRE = regexp.MustCompile(`^[a-z][a-z0-9]{1,31}$`)

// reservedFamilyNames are the first-party families, the node.<x>.*
// namespaces the protocol already uses, and the built-in capabilities: a
// scaffold named after one would collide with a first-party method or
// widen a built-in capability.
var reservedFamilyNames = map[string]bool{
	"hostinfo": true, "host": true, "fs": true, "process": true, "secrets": true,
	"describe": true, "invoke": true, "modules": true, "list": true, "pair": true,
	"event": true, "rename": true, "sdk": true, "lemon": true,
}

// goReservedModulePaths are module paths the go command treats as its own
// (`all`, `std`, `cmd`, `tool`, `work`): a scaffold named so does not build.
var goReservedModulePaths = map[string]bool{"all": true, "std": true, "cmd": true, "tool": true, "work": true}

// validFamilyName says why name cannot be a scaffolded family ("" if it can).
func validFamilyName(name string) string {
	if !familyNameRE.MatchString(name) {
		return "NAME must be 2 to 32 lowercase letters and digits, starting with a letter"
	}
	if reservedFamilyNames[name] {
		return fmt.Sprintf("%q is a first-party family or method namespace; pick another name", name)
	}
	if name == hostcalls.CapAll || name == hostcalls.CapNone {
		return fmt.Sprintf("%q is a reserved capability word; pick another name", name)
	}
	if goReservedModulePaths[name] {
		return fmt.Sprintf("%q is a name the go command reserves (it cannot be a module path); pick another name", name)
	}
	for _, c := range hostcalls.AllCapabilities {
		if c == name {
			return fmt.Sprintf("%q is a built-in capability; pick another name", name)
		}
	}
	return ""
}

func pluginNew(args []string, stdout, stderr io.Writer) int {
	fl := newFlags("lemon plugin new", stderr)
	dir := fl.String("dir", "", "directory to create (default ./NAME)")
	pos, err := parseInterleaved(fl, args)
	if err != nil {
		return flagExit(err, pluginNewUsage, stdout, stderr)
	}
	if len(pos) != 1 {
		fmt.Fprint(stderr, pluginNewUsage)
		return 2
	}
	name := pos[0]
	if why := validFamilyName(name); why != "" {
		fmt.Fprintln(stderr, "lemon plugin new:", why)
		return 2
	}
	if *dir == "" {
		*dir = name
	}
	if err := scaffold(name, *dir); err != nil {
		fmt.Fprintln(stderr, "lemon plugin new:", err)
		return 1
	}
	fmt.Fprintf(stdout, `created family %q in %s
next:
  lemon plugin build %s -o %s.wasm
  lemon plugin conformance %s.wasm --cases %s
  lemon plugin run %s.wasm node.%s.echo '{"nodeId":"local","message":"hello"}'
`, name, *dir, *dir, name, name, filepath.Join(*dir, "conformance"), name, name)
	return 0
}

// scaffold writes the family into dir, which must not exist or be empty.
// Nothing is left behind on failure.
func scaffold(name, dir string) (err error) {
	sdk, goVersion, err := sdkembed.Files()
	if err != nil {
		return err
	}
	if entries, rerr := os.ReadDir(dir); rerr == nil && len(entries) > 0 {
		return fmt.Errorf("%s exists and is not empty", dir)
	} else if rerr != nil && !errors.Is(rerr, iofs.ErrNotExist) {
		return rerr
	}
	created := false
	if _, serr := os.Stat(dir); errors.Is(serr, iofs.ErrNotExist) {
		created = true
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	defer func() {
		if err != nil && created {
			os.RemoveAll(dir)
		}
	}()
	for rel, body := range scaffoldFiles(name, goVersion) {
		if err := writeFile(filepath.Join(dir, rel), []byte(body)); err != nil {
			return err
		}
	}
	// The vendored SDK: the lemon module's guest-side packages under
	// .lemon-sdk, with a go.mod of their own (they import only stdlib).
	vendor := filepath.Join(dir, ".lemon-sdk")
	if err := writeFile(filepath.Join(vendor, "go.mod"), []byte("module lemon\n\ngo "+goVersion+"\n")); err != nil {
		return err
	}
	return iofs.WalkDir(sdk, ".", func(p string, d iofs.DirEntry, werr error) error {
		if werr != nil || d.IsDir() {
			return werr
		}
		b, err := iofs.ReadFile(sdk, p)
		if err != nil {
			return err
		}
		return writeFile(filepath.Join(vendor, filepath.FromSlash(p)), b)
	})
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// scaffoldFiles are the family's own files, keyed by relative path.
func scaffoldFiles(name, goVersion string) map[string]string {
	r := strings.NewReplacer("NAME", name, "GOVERSION", goVersion, "MAXBYTES", "1024",
		"MSG1024", strings.Repeat("a", 1024), "MSG1025", strings.Repeat("a", 1025),
		"MSGE513", strings.Repeat("é", 513))
	out := map[string]string{}
	for p, t := range map[string]string{
		"go.mod":                      scaffoldGoMod,
		"main.go":                     scaffoldMain,
		"conformance/echo.json":       scaffoldCases,
		"conformance/capability.json": scaffoldCapabilityCases,
		"README.md":                   scaffoldReadme,
		".gitignore":                  "*.wasm\n",
	} {
		out[filepath.FromSlash(p)] = r.Replace(t)
	}
	return out
}

const scaffoldGoMod = `module NAME

go GOVERSION

require lemon v0.0.0

// The plugin SDK, vendored by lemon plugin new from the lemon binary
// that created this module: it builds with GOPROXY=off.
replace lemon => ./.lemon-sdk
`

const scaffoldMain = `//go:build wasip1

// Command NAME is the module of the NAME method family. Its one method,
// node.NAME.echo {nodeId, message} -> {message}, answers with the message
// it was given (at most MAXBYTES bytes of UTF-8).
package main

import (
	"lemon/plugins/sdk"
	"lemon/protocol"
)

// maxMessageBytes bounds node.NAME.echo's message, in bytes of UTF-8.
const maxMessageBytes = MAXBYTES

func intp(n int) *int { return &n }

var no = false

// manifest is the module's whole declaration: the controller routes,
// validates params against the schema and enforces the scope from it; the
// node's ceiling must allow the capability.
var manifest = sdk.Manifest{
	Family:       "NAME",
	Version:      "0.1.0",
	Capabilities: []string{"NAME"},
	// Host calls this module makes through the SDK's typed wrappers
	// (lemon/plugins/sdk/fs, store, log, ...: each exports its list as
	// HostCalls); echo needs none.
	HostCalls: []string{},
	Methods: []sdk.MethodSpec{{
		Name:       "node.NAME.echo",
		Version:    1,
		Capability: "NAME",
		Scope:      protocol.ScopeRead,
		Retry:      protocol.RetryRead,
		Params: &protocol.Schema{
			Type:                 "object",
			AdditionalProperties: &no,
			Required:             []string{"nodeId", "message"},
			Properties: map[string]*protocol.Schema{
				"nodeId":  {Type: "string", MinLength: intp(1), MaxLength: intp(256)},
				"message": {Type: "string", MaxLength: intp(maxMessageBytes)},
			},
		},
	}},
}

func init() {
	sdk.Serve(manifest, map[string]sdk.Handler{"node.NAME.echo": echo})
}

type echoParams struct {
	NodeID  string  ` + "`json:\"nodeId\"`" + `
	Message *string ` + "`json:\"message\"`" + `
}

// echo checks its params again (the module may also run under a host that
// does not validate schemas, such as an older controller) and answers.
func echo(req *sdk.Request) (*sdk.Result, error) {
	var p echoParams
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	if err := protocol.RequireNodeID(p.NodeID); err != nil {
		return nil, err
	}
	if p.Message == nil {
		return nil, protocol.InvalidParams("message", "message is required")
	}
	if len(*p.Message) > maxMessageBytes {
		return nil, protocol.InvalidParams("message", "message is longer than MAXBYTES bytes")
	}
	return &sdk.Result{Payload: map[string]string{"message": *p.Message}}, nil
}

func main() {}
`

const scaffoldCases = `{
  "family": "NAME",
  "tree": [{"path": "home", "dir": true}],
  "node": {"cwd": "home", "roots": ["home"], "capabilities": ["NAME"]},
  "cases": [
    {"name": "echo answers with the message", "method": "node.NAME.echo",
     "params": {"nodeId": "n1", "message": "hello"},
     "expect": {"ok": true, "payload": {"message": "hello"}}},
    {"name": "an empty message is a message", "method": "node.NAME.echo",
     "params": {"nodeId": "n1", "message": ""},
     "expect": {"ok": true, "payload": {"message": ""}}},
    {"name": "a message of exactly MAXBYTES bytes passes", "method": "node.NAME.echo",
     "params": {"nodeId": "n1", "message": "MSG1024"},
     "expect": {"ok": true, "payload": {"message": "MSG1024"}}},
    {"name": "a message one byte past MAXBYTES is invalid params naming it", "method": "node.NAME.echo",
     "params": {"nodeId": "n1", "message": "MSG1025"},
     "expect": {"ok": false, "error": {"code": "INVALID_PARAMS", "details": {"field": "message"}}}},
    {"name": "the bound counts bytes, not characters (513 two-byte characters)", "method": "node.NAME.echo",
     "params": {"nodeId": "n1", "message": "MSGE513"},
     "expect": {"ok": false, "error": {"code": "INVALID_PARAMS", "details": {"field": "message"}}}},
    {"name": "missing message is invalid params", "method": "node.NAME.echo",
     "params": {"nodeId": "n1"},
     "expect": {"ok": false, "error": {"code": "INVALID_PARAMS", "details": {"field": "message"}}}},
    {"name": "missing nodeId is invalid params", "method": "node.NAME.echo",
     "params": {"message": "hello"},
     "expect": {"ok": false, "error": {"code": "INVALID_PARAMS", "details": {"field": "nodeId"}}}},
    {"name": "an unknown field is invalid params naming it", "method": "node.NAME.echo",
     "params": {"nodeId": "n1", "message": "hello", "extra": 1},
     "expect": {"ok": false, "error": {"code": "INVALID_PARAMS", "details": {"field": "extra"}}}},
    {"name": "a message of the wrong type is invalid params", "method": "node.NAME.echo",
     "params": {"nodeId": "n1", "message": 7},
     "expect": {"ok": false, "error": {"code": "INVALID_PARAMS"}}}
  ]
}
`

const scaffoldCapabilityCases = `{
  "family": "NAME",
  "tree": [{"path": "home", "dir": true}],
  "node": {"cwd": "home", "roots": ["home"], "capabilities": ["read"]},
  "cases": [
    {"name": "a node whose ceiling omits NAME refuses at the gate", "method": "node.NAME.echo",
     "params": {"nodeId": "n1", "message": "hello"},
     "expect": {"ok": false, "error": {"code": "FORBIDDEN", "details": {"code": "capability_denied"}}}}
  ]
}
`

const scaffoldReadme = "# NAME: a lemon method family\n\n" +
	"This module serves `node.NAME.echo {nodeId, message}` -> `{message}` (`message`: a string of at\n" +
	"most MAXBYTES bytes). It was made by `lemon plugin new NAME`; the walkthrough is in lemon's\n" +
	"docs/PLUGINS.md.\n\n" +
	"* `main.go`: the manifest (the method's declaration: scope `operator.read`, retry class `read`,\n" +
	"  capability `NAME`, params schema) and the handler.\n" +
	"* `conformance/*.json`: cases `lemon plugin conformance` runs through the real host.\n" +
	"* `.lemon-sdk/`: the plugin SDK vendored from the lemon binary that created this directory\n" +
	"  (stdlib-only, so the module builds with no network). Do not edit it; to update it, scaffold\n" +
	"  again with a newer lemon and copy `.lemon-sdk` over.\n\n" +
	"```sh\n" +
	"lemon plugin build . -o NAME.wasm                # wasip1 reactor; fails on undeclared host calls\n" +
	"lemon plugin conformance NAME.wasm --cases conformance\n" +
	"lemon plugin run NAME.wasm node.NAME.echo '{\"nodeId\":\"local\",\"message\":\"hello\"}'\n" +
	"lemon modules export ./set                        # the built-in module set\n" +
	"lemon plugin build . --set ./set                  # add this module to it\n" +
	"lemon dev --module-set ./set\n" +
	"```\n\n" +
	"To add a method: declare it in `manifest.Methods`, register its handler in `init`, add cases\n" +
	"under `conformance/`. To use a host call, call its typed wrapper (`lemon/plugins/sdk/fs`,\n" +
	"`store`, `log`, `blob`, ...), list the call in `HostCalls` and its capability in `Capabilities`\n" +
	"(lemon's docs/HOSTCALLS.md lists every call, its shapes and capability).\n"
