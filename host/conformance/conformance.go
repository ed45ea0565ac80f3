// Package conformance runs a family's conformance cases (JSON data files
// beside each plugin, plugins/<family>/conformance/*.json) through the
// real host against any module of that family: the first-party module in
// `go test`, a third-party one with `lemon plugin conformance`.
//
// Each case gets a fresh temporary tree, a fresh set of host-call families
// rooted in it, and a fresh host. The format is in docs/CONFORMANCE.md.
package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"lemon/host"
	"lemon/host/moduleset"
	"lemon/hostcalls"
	"lemon/hostcalls/families"
	"lemon/policies"
	"lemon/protocol"
)

// File is one conformance data file.
type File struct {
	Family string  `json:"family"`
	Tree   []Entry `json:"tree"`
	Node   Node    `json:"node"`
	Cases  []Case  `json:"cases"`
	// Path is where the file was read from (not part of the JSON).
	Path string `json:"-"`
}

// Entry is one thing created in the case's temporary tree. Exactly one of
// File, Dir, Symlink, Fifo is set. Mode (octal string) applies to files
// and dirs.
type Entry struct {
	Path    string  `json:"path"`
	File    *string `json:"file,omitempty"`
	Dir     bool    `json:"dir,omitempty"`
	Symlink string  `json:"symlink,omitempty"`
	Fifo    bool    `json:"fifo,omitempty"`
	Mode    string  `json:"mode,omitempty"`
}

// Node configures the node under test; paths are relative to the tree.
// Policy is worker-policy TOML applied on top.
type Node struct {
	Cwd          string   `json:"cwd"`
	Roots        []string `json:"roots"`
	Capabilities []string `json:"capabilities"`
	Policy       string   `json:"policy"`
	NodeID       string   `json:"nodeId"`
}

// Step is one request and its expectation.
type Step struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Expect Expect          `json:"expect"`
}

// Case is a named first step plus follow-up steps on the same tree.
type Case struct {
	Name string `json:"name"`
	Step
	Then []Step `json:"then"`
}

// Expect is a subset match on the response.
type Expect struct {
	OK      bool            `json:"ok"`
	Payload json.RawMessage `json:"payload"`
	Error   json.RawMessage `json:"error"`
}

// LoadDir reads every *.json file of dir.
func LoadDir(dir string) ([]File, error) { return LoadFS(os.DirFS(dir)) }

// LoadFS reads every *.json file at the top of fsys, strictly.
func LoadFS(fsys iofs.FS) ([]File, error) {
	paths, err := iofs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []File
	for _, p := range paths {
		data, err := iofs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		var f File
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		f.Path = p
		out = append(out, f)
	}
	return out, nil
}

// Runner runs cases against one module.
type Runner struct {
	Wasm     []byte
	CacheDir string // wazero compilation cache shared by every case
}

// Result is one case's outcome; Err is nil when it passed.
type Result struct {
	File, Case string
	Err        error
}

// RunFile runs every case of f.
func (r *Runner) RunFile(ctx context.Context, f File) []Result {
	var out []Result
	for _, c := range f.Cases {
		out = append(out, Result{File: filepath.Base(f.Path), Case: c.Name, Err: r.runCase(ctx, f, c)})
	}
	return out
}

func (r *Runner) runCase(ctx context.Context, f File, c Case) error {
	tmp, err := os.MkdirTemp("", "lemon-conformance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if tmp, err = filepath.EvalSymlinks(tmp); err != nil {
		return err
	}
	if err := makeTree(tmp, f.Tree); err != nil {
		return fmt.Errorf("tree: %w", err)
	}
	pol := &policies.Worker{}
	if f.Node.Policy != "" {
		if pol, err = policies.ParseWorker([]byte(f.Node.Policy)); err != nil {
			return fmt.Errorf("node policy: %w", err)
		}
	}
	state := filepath.Join(tmp, ".state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return err
	}
	if pol.Vault == (policies.VaultKey{}) {
		key := filepath.Join(state, "vault.key")
		b := make([]byte, 32)
		rand.Read(b)
		if err := os.WriteFile(key, []byte(hex.EncodeToString(b)), 0o600); err != nil {
			return err
		}
		pol.Vault.KeyFile = key
	}
	cwd := filepath.Join(tmp, f.Node.Cwd)
	var roots []string
	for _, root := range f.Node.Roots {
		roots = append(roots, filepath.Join(tmp, root))
	}
	fams, err := families.Build(families.Config{DefaultCwd: cwd, Roots: roots, Home: cwd, StateDir: state,
		LemonVersion: "conformance", Policy: pol})
	if err != nil {
		return fmt.Errorf("families: %w", err)
	}
	defer fams.Close()
	// The fixture's ceiling obeys the node's rules (docs/POLICY.md,
	// "Capabilities"): a name a node would refuse fails here too, and no
	// ceiling means "all", as on a node.
	ceiling := f.Node.Capabilities
	if ceiling == nil {
		ceiling = pol.Ceiling()
	}
	if err := hostcalls.CheckCeiling(ceiling); err != nil {
		return fmt.Errorf("node.capabilities: %w", err)
	}
	h, err := host.New(ctx, host.Config{CacheDir: r.CacheDir, Ceiling: ceiling, Tables: fams.Tables})
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	if _, err := h.Load(ctx, pinOf(f.Family, r.Wasm), r.Wasm); err != nil {
		return err
	}
	nodeID := f.Node.NodeID
	if nodeID == "" {
		nodeID = "n1"
	}
	vars := map[string]string{"TMP": tmp}
	steps := append([]Step{c.Step}, c.Then...)
	for i, s := range steps {
		params := expand(string(s.Params), vars)
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		payload, perr := h.Invoke(cctx, protocol.InvokeRequest{InvokeID: fmt.Sprintf("c%d", i), NodeID: nodeID,
			Method: s.Method, Args: json.RawMessage(params), SessionGeneration: 1})
		cancel()
		if err := check(s.Expect, payload, perr, vars); err != nil {
			return fmt.Errorf("step %d (%s): %w", i, s.Method, err)
		}
		if payload != nil {
			var m map[string]any
			if json.Unmarshal(payload, &m) == nil {
				for k, v := range m {
					if str, ok := v.(string); ok {
						vars[fmt.Sprintf("step%d.%s", i, k)] = str
					}
					if n, ok := v.(float64); ok {
						vars[fmt.Sprintf("step%d.%s", i, k)] = strconv.FormatFloat(n, 'f', -1, 64)
					}
				}
			}
		}
	}
	return nil
}

func pinOf(family string, wasm []byte) moduleset.Module {
	m := moduleset.Module{Family: family, Version: "conformance", Size: int64(len(wasm)), File: family + ".wasm"}
	m.SHA256 = sha256Hex(wasm)
	return m
}

var varRE = regexp.MustCompile(`\$\{([A-Za-z0-9_.]+)\}`)

// numRE is a quoted "${num:stepN.field}": it becomes the bare number of a
// numeric payload field (e.g. a write's mtimeMs carried into the next
// expectedModifiedAtMs).
var numRE = regexp.MustCompile(`"\$\{num:([A-Za-z0-9_.]+)\}"`)

func expand(s string, vars map[string]string) string {
	s = numRE.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := vars[m[7:len(m)-2]]; ok {
			if _, err := strconv.ParseFloat(v, 64); err == nil {
				return v
			}
		}
		return m
	})
	return varRE.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := vars[m[2:len(m)-1]]; ok {
			b, _ := json.Marshal(v)
			return string(b[1 : len(b)-1])
		}
		return m
	})
}

func makeTree(root string, entries []Entry) error {
	for _, e := range entries {
		if e.Path == "" || filepath.IsAbs(e.Path) || strings.Contains(e.Path, "..") {
			return fmt.Errorf("bad tree path %q", e.Path)
		}
		p := filepath.Join(root, e.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if e.Mode != "" {
			var m uint32
			if _, err := fmt.Sscanf(e.Mode, "%o", &m); err != nil {
				return fmt.Errorf("bad mode %q", e.Mode)
			}
			mode = os.FileMode(m)
		}
		var err error
		switch {
		case e.File != nil:
			err = os.WriteFile(p, []byte(expand(*e.File, map[string]string{"TMP": root})), 0o644)
			if err == nil {
				err = os.Chmod(p, mode)
			}
		case e.Dir:
			if err = os.MkdirAll(p, 0o755); err == nil && e.Mode != "" {
				err = os.Chmod(p, mode)
			}
		case e.Symlink != "":
			err = os.Symlink(expand(e.Symlink, map[string]string{"TMP": root}), p)
		case e.Fifo:
			err = syscall.Mkfifo(p, 0o644)
		default:
			err = fmt.Errorf("tree entry %q has no kind", e.Path)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
