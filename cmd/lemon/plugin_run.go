package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"lemon/host"
	"lemon/host/moduleset"
	"lemon/hostcalls"
	"lemon/hostcalls/families"
	"lemon/policies"
	"lemon/protocol"
	"lemon/version"
)

const pluginRunUsage = `usage: lemon plugin run MODULE.wasm METHOD [PARAMS_JSON | -] [--allowed-root DIR]... [--cwd DIR]
                        [--capabilities LIST] [--policy worker.toml] [--node-id ID] [--timeout DURATION]

Loads the module into a local in-process host (the node's real host and
gate, no controller and no network) and runs one call, as a node would.
The payload is printed as JSON on stdout (exit 0); an error is printed as
its error object JSON on stderr (exit 1); a usage or load error exits 2
or 1. PARAMS_JSON is a JSON object of at most 1 MiB ("-" reads it from
stdin; default {}).
A missing "nodeId" is filled in with --node-id.

  --cwd DIR            the node's default cwd (default: the current directory)
  --allowed-root DIR   an allowed file root (repeatable; default: the cwd)
  --capabilities LIST  comma-separated ceiling (default: every built-in
                       capability and every capability the module declares)
  --policy FILE        worker policy TOML (commands, limits, rate limits, vault key)
  --node-id ID         the nodeId the host answers to (default "local")
  --timeout D          deadline of the call (default 30s)

State (store, vault, compilation cache) lives in a temporary directory
removed at exit; without a vault key in the policy a fresh one is made.
`

var capabilityNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

func pluginRun(args []string, stdout, stderr io.Writer) int {
	fl := newFlags("lemon plugin run", stderr)
	var roots stringList
	fl.Var(&roots, "allowed-root", "allowed file root (repeatable)")
	cwdFlag := fl.String("cwd", "", "default cwd")
	capsFlag := fl.String("capabilities", "", "capability ceiling")
	policyFile := fl.String("policy", "", "worker policy TOML file")
	nodeID := fl.String("node-id", "local", "nodeId of the local host")
	timeout := fl.Duration("timeout", 30*time.Second, "deadline of the call")
	pos, err := parseInterleaved(fl, args)
	if err != nil {
		return flagExit(err, pluginRunUsage, stdout, stderr)
	}
	if len(pos) < 2 || len(pos) > 3 || *timeout <= 0 {
		fmt.Fprint(stderr, pluginRunUsage)
		return 2
	}
	fail := func(code int, err error) int {
		fmt.Fprintln(stderr, "lemon plugin run:", err)
		return code
	}
	method := pos[1]
	params := []byte("{}")
	if len(pos) == 3 {
		if pos[2] == "-" {
			if params, err = io.ReadAll(io.LimitReader(os.Stdin, protocol.DefaultMaxPayload+1)); err != nil {
				return fail(1, err)
			}
		} else {
			params = []byte(pos[2])
		}
	}
	if len(params) > protocol.DefaultMaxPayload {
		return fail(2, fmt.Errorf("PARAMS_JSON is larger than %d bytes (the default frame cap)", protocol.DefaultMaxPayload))
	}
	if params, err = withNodeID(params, *nodeID); err != nil {
		return fail(2, err)
	}
	wasm, err := os.ReadFile(pos[0])
	if err != nil {
		return fail(1, err)
	}
	ctx := context.Background()
	man, err := host.Inspect(ctx, wasm)
	if err != nil {
		return fail(1, err)
	}
	pol := &policies.Worker{}
	if *policyFile != "" {
		if pol, err = policies.LoadWorker(*policyFile); err != nil {
			return fail(1, err)
		}
	}
	ceiling, err := runCeiling(*capsFlag, man)
	if err != nil {
		return fail(2, err)
	}
	cwd := *cwdFlag
	if cwd == "" {
		if cwd, err = os.Getwd(); err != nil {
			return fail(1, fmt.Errorf("cannot determine the current directory; pass --cwd"))
		}
	}
	if cwd, err = existingDir(cwd); err != nil {
		return fail(2, fmt.Errorf("--cwd: %w", err))
	}
	var absRoots []string
	for _, r := range roots {
		abs, err := existingDir(r)
		if err != nil {
			return fail(2, fmt.Errorf("--allowed-root: %w", err))
		}
		absRoots = append(absRoots, abs)
	}
	if len(absRoots) == 0 {
		absRoots = []string{cwd}
	}
	if len(absRoots) > policies.SpecMaxAllowedRoots {
		return fail(2, fmt.Errorf("at most %d allowed roots", policies.SpecMaxAllowedRoots))
	}

	state, err := os.MkdirTemp("", "lemon-plugin-run-")
	if err != nil {
		return fail(1, err)
	}
	defer os.RemoveAll(state)
	if pol.Vault == (policies.VaultKey{}) {
		key := filepath.Join(state, "vault.key")
		b := make([]byte, 32)
		rand.Read(b)
		if err := os.WriteFile(key, []byte(hex.EncodeToString(b)), 0o600); err != nil {
			return fail(1, err)
		}
		pol.Vault.KeyFile = key
	}
	// The module's own log records and a trap's panic text go to stderr,
	// so an author sees them; the per-host-call audit events do not.
	logger := slog.New(moduleLogHandler{slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug})})
	fams, err := families.Build(families.Config{DefaultCwd: cwd, Roots: absRoots, Home: cwd,
		StateDir: state, LemonVersion: version.Version, Policy: pol, MaxPayload: protocol.DefaultMaxPayload,
		Logger: logger})
	if err != nil {
		return fail(1, err)
	}
	defer fams.Close()
	var rules []host.RateRule
	for _, r := range pol.RateLimits {
		rules = append(rules, host.RateRule{Module: r.Module, HostCall: r.HostCall, PerSecond: r.PerSecond, Burst: r.Burst})
	}
	h, err := host.New(ctx, host.Config{CacheDir: filepath.Join(state, "cache"), Ceiling: ceiling,
		MemoryLimitPages: pol.Pool.MemoryLimitPages, PoolSize: pol.Pool.Size,
		RecycleAfterCalls: pol.Pool.RecycleAfterCalls, RateRules: rules, Tables: fams.Tables, Logger: logger})
	if err != nil {
		return fail(1, err)
	}
	defer h.Close(ctx)
	sum := sha256Hex(wasm)
	pin := moduleset.Module{Family: man.Family, Version: man.Version, SHA256: sum, Size: int64(len(wasm)),
		File: "module.wasm"}
	if _, err := h.Load(ctx, pin, wasm); err != nil {
		return fail(1, err)
	}
	cctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	payload, perr := h.Invoke(cctx, protocol.InvokeRequest{InvokeID: "run-1", NodeID: *nodeID, Method: method,
		Args: json.RawMessage(params), SessionGeneration: 1})
	if perr != nil {
		b, _ := json.Marshal(perr)
		fmt.Fprintln(stderr, string(b))
		return 1
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, payload, "", "  ") != nil {
		pretty.Reset()
		pretty.Write(payload)
	}
	fmt.Fprintln(stdout, pretty.String())
	return 0
}

// runCeiling is the ceiling of `plugin run`: the LIST given (any
// capability names, since a local host knows the module's own), else every
// built-in capability plus the module's declared ones.
func runCeiling(list string, man host.Manifest) ([]string, error) {
	set := map[string]bool{}
	if list == "" || list == "all" {
		for _, c := range hostcalls.AllCapabilities {
			set[c] = true
		}
		for _, c := range man.Capabilities {
			set[c] = true
		}
	} else {
		for _, c := range strings.Split(list, ",") {
			c = strings.TrimSpace(c)
			if c == "" {
				continue
			}
			if !capabilityNameRE.MatchString(c) {
				return nil, fmt.Errorf("--capabilities: %q is not a capability name (lowercase letters, digits, - and _)", c)
			}
			set[c] = true
		}
	}
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out, nil
}

// withNodeID checks params is a JSON object and adds "nodeId" when absent.
func withNodeID(params []byte, nodeID string) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(params, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("PARAMS_JSON must be a JSON object")
	}
	if _, ok := obj["nodeId"]; ok {
		return params, nil
	}
	id, _ := json.Marshal(nodeID)
	obj["nodeId"] = id
	return json.Marshal(obj)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// moduleLogHandler passes on only what a module author needs to see from
// a local run: the module's log records and the panic of a trap.
type moduleLogHandler struct{ slog.Handler }

func (h moduleLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message != "execution_node.guest_log" && r.Message != "execution_node.module_trapped" {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h moduleLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return moduleLogHandler{h.Handler.WithAttrs(as)}
}

func (h moduleLogHandler) WithGroup(name string) slog.Handler {
	return moduleLogHandler{h.Handler.WithGroup(name)}
}
