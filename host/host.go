package host

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"lemon/audit"
	"lemon/host/abi"
	"lemon/host/moduleset"
	"lemon/host/terminate"
	"lemon/hostcalls"
	"lemon/protocol"
)

// Config configures a Host. Zero values take the defaults named.
type Config struct {
	// CacheDir holds wazero's compilation cache so a restart does not
	// recompile; "" compiles in memory only.
	CacheDir string
	// MemoryLimitPages caps each instance's memory in 64 KiB pages
	// (default 4096 = 256 MiB).
	MemoryLimitPages uint32
	// PoolSize is the most live instances per module (default 4).
	PoolSize int
	// RecycleAfterCalls closes an instance after this many invocations
	// (default 1000).
	RecycleAfterCalls int
	// RecycleAfterPages closes an instance once its memory has grown past
	// this many pages (default 1024 = 64 MiB); wasm memory never shrinks.
	RecycleAfterPages uint32
	// Ceiling is the node's capability ceiling: capability names, built-in
	// (hostcalls.Cap*) or declared by modules; hostcalls.CapAll in it means
	// every capability (docs/POLICY.md, "Capabilities").
	Ceiling []string
	// RateRules are the gate's token buckets.
	RateRules []RateRule
	// Tables are the host-call families offered to modules.
	Tables []hostcalls.Table
	// Logger receives audit events; nil discards them.
	Logger *slog.Logger
	// Registry receives the host's metrics (docs/OPERATIONS.md); nil uses
	// a private registry. Hosts built in turn on one registry share them.
	Registry prometheus.Registerer
	// Audit receives one record per host call (nil: none).
	Audit *audit.Sink
}

// Host runs modules. It is safe for concurrent use.
type Host struct {
	cfg      Config
	runtime  wazero.Runtime
	cache    wazero.CompilationCache
	gate     *Gate
	hostcall map[string]*hostcalls.HostCall

	mu       sync.RWMutex
	modules  map[string]*Module // by family
	methods  map[string]*Module // by method name
	refused  map[string]refusal // method name → its refused module (LoadSet)
	statuses []protocol.ModuleStatus
}

// New creates the runtime and registers the host calls of cfg.Tables as
// module "lemon". Close releases it.
func New(ctx context.Context, cfg Config) (*Host, error) {
	if cfg.MemoryLimitPages == 0 {
		cfg.MemoryLimitPages = 4096
	}
	if cfg.PoolSize <= 0 {
		cfg.PoolSize = 4
	}
	if cfg.RecycleAfterCalls <= 0 {
		cfg.RecycleAfterCalls = 1000
	}
	if cfg.RecycleAfterPages == 0 {
		cfg.RecycleAfterPages = 1024
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	// No WithCloseOnContextDone: modules are compiled from terminate.Instrument's
	// output and stopped through its stop global (docs/ABI.md, "Instances").
	rc := wazero.NewRuntimeConfigCompiler().
		WithMemoryLimitPages(cfg.MemoryLimitPages)
	h := &Host{cfg: cfg, hostcall: map[string]*hostcalls.HostCall{},
		modules: map[string]*Module{}, methods: map[string]*Module{}, refused: map[string]refusal{}}
	if cfg.CacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("host: compilation cache: %w", err)
		}
		h.cache = cache
		rc = rc.WithCompilationCache(cache)
	}
	h.runtime = wazero.NewRuntimeWithConfig(ctx, rc)
	h.gate = newGate(cfg.Ceiling, cfg.RateRules, cfg.Logger, cfg.Registry, cfg.Audit)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, h.runtime); err != nil {
		h.Close(ctx)
		return nil, fmt.Errorf("host: wasi: %w", err)
	}
	if err := h.registerHostCalls(ctx); err != nil {
		h.Close(ctx)
		return nil, err
	}
	return h, nil
}

// Close closes every instance and the runtime.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	for _, m := range h.modules {
		m.pool.close(ctx)
	}
	h.mu.Unlock()
	err := h.runtime.Close(ctx)
	if h.cache != nil {
		h.cache.Close(ctx)
	}
	return err
}

// HostCalls lists the registered host calls, sorted by name.
func (h *Host) HostCalls() []hostcalls.HostCall {
	out := make([]hostcalls.HostCall, 0, len(h.hostcall))
	for _, hc := range h.hostcall {
		out = append(out, *hc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// maxHostCallArgs bounds the JSON args a module may pass to one host call.
const maxHostCallArgs = 1 << 20

const (
	statusOK    = 0
	statusError = 1
)

func (h *Host) registerHostCalls(ctx context.Context) error {
	b := h.runtime.NewHostModuleBuilder("lemon")
	i32 := api.ValueTypeI32
	b.NewFunctionBuilder().WithName("result_read").WithParameterNames("ptr", "len").
		WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
			inv := invocationFrom(ctx)
			ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
			if inv == nil {
				stack[0] = 0
				return
			}
			p := inv.takePending()
			if uint32(len(p)) < n {
				n = uint32(len(p))
			}
			if !m.Memory().Write(ptr, p[:n]) {
				n = 0
			}
			stack[0] = api.EncodeU32(n)
		}), []api.ValueType{i32, i32}, []api.ValueType{i32}).Export("result_read")

	for _, t := range h.cfg.Tables {
		for i := range t {
			hc := t[i]
			if hc.Name == "" || hc.Func == nil || hc.Capability == "" {
				return fmt.Errorf("host: host call %q is incompletely declared", hc.Name)
			}
			if _, dup := h.hostcall[hc.Name]; dup || hc.Name == "result_read" {
				return fmt.Errorf("host: host call %q declared twice", hc.Name)
			}
			h.hostcall[hc.Name] = &hc
			b.NewFunctionBuilder().WithName(hc.Name).WithParameterNames("args_ptr", "args_len").
				WithGoModuleFunction(h.hostFunc(&hc), []api.ValueType{i32, i32}, []api.ValueType{api.ValueTypeI64}).
				Export(hc.Name)
		}
	}
	_, err := b.Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("host: host module: %w", err)
	}
	return nil
}

// hostFunc adapts a table entry to the ABI: read args from guest memory,
// pass the gate, leave the result pending for result_read.
func (h *Host) hostFunc(hc *hostcalls.HostCall) api.GoModuleFunc {
	return func(ctx context.Context, m api.Module, stack []uint64) {
		inv := invocationFrom(ctx)
		if inv == nil {
			stack[0] = 0
			return
		}
		ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
		var out []byte
		var perr *protocol.Error
		if n > maxHostCallArgs {
			perr = protocol.Errorf(protocol.CodeInvalidParams, "host-call arguments too large")
		} else if args, ok := m.Memory().Read(ptr, n); !ok {
			perr = protocol.Errorf(protocol.CodeInvalidRequest, "host-call arguments out of bounds")
		} else {
			// Copy: guest memory may move if the host call grows it.
			out, perr = h.gate.call(ctx, inv, hc, append([]byte(nil), args...))
		}
		status := uint64(statusOK)
		if perr != nil {
			status = statusError
			out, _ = json.Marshal(perr)
		}
		inv.setPending(out)
		stack[0] = status<<32 | uint64(uint32(len(out)))
	}
}

// ErrModuleRejected wraps every reason a module is refused at load.
var ErrModuleRejected = errors.New("module rejected")

// ErrHostCallUnavailable (wrapped with ErrModuleRejected) means the module
// needs a host-call family this node does not offer (built without it, or
// not configured, such as a vault without a master key).
var ErrHostCallUnavailable = errors.New("host call unavailable on this node")

// Refusal reasons: the bounded classification a refused module's status
// carries (protocol.ModuleStatus.Reason starts with one of them).
const (
	ReasonDigestMismatch      = "digest_mismatch"      // bytes absent or not the pinned sha256/size
	ReasonCompileFailed       = "compile_failed"       // not a valid wasm module
	ReasonHostCallUnavailable = "hostcall_unavailable" // needs a host call this node does not offer
	ReasonImportsNotDeclared  = "imports_not_declared" // imports a host call its manifest does not declare
	ReasonInstantiateFailed   = "instantiate_failed"   // start function or ABI exports failed
	ReasonABIMismatch         = "abi_mismatch"         // built for another ABI version (lemon_abi_version)
	ReasonDescribeFailed      = "describe_failed"      // lemon_describe failed or is not JSON
	ReasonManifestInvalid     = "manifest_invalid"     // the described manifest breaks the ABI rules
	ReasonFamilyMismatch      = "family_mismatch"      // describes another family than pinned
	ReasonDeclarationMismatch = "declaration_mismatch" // methods differ from the pinned declarations
	ReasonDuplicate           = "duplicate"            // family or method already served
)

// MaxReasonBytes bounds a refusal reason (code, ": ", detail).
const MaxReasonBytes = 200

// RefusalError is why a module was refused at load. It wraps
// ErrModuleRejected (and ErrHostCallUnavailable when Reason is
// ReasonHostCallUnavailable). Its text holds only the reason code and
// names from the module's manifest, never request content.
type RefusalError struct {
	// Reason is one of the Reason* codes.
	Reason string
	msg    string
	cause  error
}

func (e *RefusalError) Error() string { return ErrModuleRejected.Error() + ": " + e.msg }

// Unwrap exposes ErrModuleRejected, ErrHostCallUnavailable and the cause.
func (e *RefusalError) Unwrap() []error {
	out := []error{ErrModuleRejected}
	if e.Reason == ReasonHostCallUnavailable {
		out = append(out, ErrHostCallUnavailable)
	}
	if e.cause != nil {
		out = append(out, e.cause)
	}
	return out
}

// Status is the bounded status line of the refusal: "reason: detail",
// at most MaxReasonBytes of printable ASCII.
func (e *RefusalError) Status() string {
	s := e.Reason + ": " + e.msg
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s) && len(b) < MaxReasonBytes; i++ {
		if c := s[i]; c >= 0x20 && c <= 0x7e {
			b = append(b, c)
		} else {
			b = append(b, '?')
		}
	}
	return string(b)
}

// ReasonOf returns the bounded status line of a load error: a
// RefusalError's Status, else "manifest_invalid".
func ReasonOf(err error) string {
	var re *RefusalError
	if errors.As(err, &re) {
		return re.Status()
	}
	return ReasonManifestInvalid
}

func refuse(reason, format string, args ...any) error {
	return &RefusalError{Reason: reason, msg: fmt.Sprintf(format, args...)}
}

func rejected(format string, args ...any) error {
	return refuse(ReasonManifestInvalid, format, args...)
}

// LoadSet verifies and loads the modules of a pinned set one by one
// (bytes keyed by family, as moduleset.Load returns them; a missing entry
// is refused as digest_mismatch). A module that fails any check is
// refused alone, and its methods answer UNAVAILABLE module_refused; the
// rest serve. It returns every module's status in manifest order.
func (h *Host) LoadSet(ctx context.Context, m moduleset.Manifest, bytesByFamily map[string][]byte) []protocol.ModuleStatus {
	out := make([]protocol.ModuleStatus, 0, len(m.Modules))
	for _, mod := range m.Modules {
		st := protocol.ModuleStatus{Family: mod.Family, Version: mod.Version, SHA256: mod.SHA256, State: protocol.ModuleLoaded}
		if _, err := h.Load(ctx, mod, bytesByFamily[mod.Family]); err != nil {
			st.State, st.Reason = protocol.ModuleRefused, ReasonOf(err)
			h.refuseModule(mod, st.Reason)
			if h.cfg.Logger != nil {
				h.cfg.Logger.Warn("module refused", "family", mod.Family, "version", mod.Version, "reason", st.Reason)
			}
		}
		out = append(out, st)
	}
	h.mu.Lock()
	h.statuses = append([]protocol.ModuleStatus(nil), out...)
	h.mu.Unlock()
	return out
}

// refuseModule records that pin's declared methods belong to a refused
// module, so calls to them answer module_refused instead of "not served".
func (h *Host) refuseModule(pin moduleset.Module, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ms := range pin.Methods {
		if _, served := h.methods[ms.Name]; !served {
			h.refused[ms.Name] = refusal{family: pin.Family, reason: reason}
		}
	}
}

// ModuleStatuses returns the statuses of the last LoadSet.
func (h *Host) ModuleStatuses() []protocol.ModuleStatus {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return append([]protocol.ModuleStatus(nil), h.statuses...)
}

// NotServed reports why a method the set declares is not in Methods:
// it belongs to a module that was refused (UNAVAILABLE, details.code
// module_refused, retrySafe:true: nothing ran), or its capability is
// outside the node's ceiling (FORBIDDEN capability_denied). ok is false
// for a method the host knows nothing of, or one it serves.
func (h *Host) NotServed(method string) (perr *protocol.Error, ok bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if r, refused := h.refused[method]; refused {
		return ModuleRefusedError(r.family, r.reason), true
	}
	if m, loaded := h.methods[method]; loaded && !h.gate.withinCeiling(m.methodSpecs[method].Capability) {
		return errForbiddenCap, true
	}
	return nil, false
}

// ModuleRefusedError is the error a method of a refused module answers.
// The message names the family and the bounded reason.
func ModuleRefusedError(family, reason string) *protocol.Error {
	return protocol.DomainError(protocol.CodeUnavailable, protocol.DomainModuleRefused,
		"module "+family+" was refused by the node: "+reason).WithRetry(true, false)
}

type refusal struct{ family, reason string }

// Load verifies wasm against its pinned digest before compiling, checks
// its imports against its manifest and the host's tables, and makes its
// methods available.
func (h *Host) Load(ctx context.Context, pin moduleset.Module, wasm []byte) (*Module, error) {
	if err := pin.Verify(wasm); err != nil {
		return nil, &RefusalError{Reason: ReasonDigestMismatch, msg: pin.Family + ": " + moduleset.ErrDigestMismatch.Error(), cause: err}
	}
	mod, err := h.compile(ctx, wasm)
	if err != nil {
		return nil, err
	}
	if mod.family != pin.Family {
		mod.pool.close(ctx)
		return nil, refuse(ReasonFamilyMismatch, "module declares family %q but is pinned as %q", mod.family, pin.Family)
	}
	if err := matchDeclarations(pin, mod.manifest.Methods); err != nil {
		mod.pool.close(ctx)
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.modules[mod.family]; dup {
		mod.pool.close(ctx)
		return nil, refuse(ReasonDuplicate, "family %q loaded twice", mod.family)
	}
	for _, ms := range mod.manifest.Methods {
		if _, dup := h.methods[ms.Name]; dup {
			mod.pool.close(ctx)
			return nil, refuse(ReasonDuplicate, "method %q served by two modules", ms.Name)
		}
	}
	mod.sha256 = pin.SHA256
	h.modules[mod.family] = mod
	for _, ms := range mod.manifest.Methods {
		h.methods[ms.Name] = mod
		delete(h.refused, ms.Name)
	}
	return mod, nil
}

// matchDeclarations refuses a module whose described methods differ from
// the declarations pinned for it (the set's manifest carries them; a pin
// without declarations, as a hand-made one in tests, checks nothing).
func matchDeclarations(pin moduleset.Module, described []MethodSpec) error {
	if len(pin.Methods) == 0 {
		return nil
	}
	canon := func(ms []MethodSpec) string {
		c := append([]MethodSpec(nil), ms...)
		sort.Slice(c, func(i, j int) bool { return c[i].Name < c[j].Name })
		b, _ := json.Marshal(c)
		return string(b)
	}
	if canon(pin.Methods) != canon(described) {
		return refuse(ReasonDeclarationMismatch, "module %s describes methods that differ from its pinned declarations", pin.Family)
	}
	return nil
}

// Inspect returns a module's manifest without loading it anywhere: it
// compiles wasm in a throwaway runtime whose "lemon" imports all fail, and
// calls lemon_describe (for build.sh and `lemon plugin inspect`).
func Inspect(ctx context.Context, wasm []byte) (Manifest, error) {
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, r); err != nil {
		return Manifest{}, err
	}
	wasm, err := terminate.Instrument(wasm)
	if err != nil {
		return Manifest{}, rejected("compile: %v", err)
	}
	compiled, err := r.CompileModule(ctx, wasm)
	if err != nil {
		return Manifest{}, rejected("compile: %v", err)
	}
	b := r.NewHostModuleBuilder("lemon")
	for _, def := range compiled.ImportedFunctions() {
		modName, name, _ := def.Import()
		if modName != "lemon" {
			continue
		}
		results := def.ResultTypes()
		b.NewFunctionBuilder().WithGoFunction(api.GoFunc(func(ctx context.Context, stack []uint64) {
			for i := range results {
				stack[i] = 0
			}
		}), def.ParamTypes(), results).Export(name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return Manifest{}, rejected("imports: %v", err)
	}
	mod, err := r.InstantiateModule(ctx, compiled, moduleConfig())
	if err != nil {
		return Manifest{}, rejected("instantiate: %v", err)
	}
	if err := initialize(ctx, mod); err != nil {
		mod.Close(context.WithoutCancel(ctx))
		return Manifest{}, rejected("instantiate: %v", err)
	}
	inst := &instance{mod: mod, stop: stopFlag(mod)}
	return describe(ctx, inst)
}

func (h *Host) compile(ctx context.Context, wasm []byte) (*Module, error) {
	// The compilation cache keys on the bytes compiled, so a cached
	// compile is always of instrumented code.
	wasm, err := terminate.Instrument(wasm)
	if err != nil {
		return nil, refuse(ReasonCompileFailed, "compile failed: %v", err)
	}
	compiled, err := h.runtime.CompileModule(ctx, wasm)
	if err != nil {
		return nil, refuse(ReasonCompileFailed, "compile failed")
	}
	// A module importing a host call this node did not build (e.g. no
	// vault key configured) cannot be instantiated; say so before trying.
	for _, def := range compiled.ImportedFunctions() {
		if modName, name, _ := def.Import(); modName == "lemon" && name != "result_read" {
			if _, ok := h.hostcall[name]; !ok {
				compiled.Close(ctx)
				return nil, refuse(ReasonHostCallUnavailable, "module needs host call %q", name)
			}
		}
	}
	mod := &Module{host: h, compiled: compiled}
	mod.pool = newPool(mod, h.cfg.PoolSize)
	inst, err := mod.pool.instantiate(ctx)
	if err != nil {
		compiled.Close(ctx)
		var mismatch *abiMismatch
		if errors.As(err, &mismatch) {
			return nil, refuse(ReasonABIMismatch, "%v", err)
		}
		return nil, refuse(ReasonInstantiateFailed, "instantiate: %v", err)
	}
	man, err := describe(ctx, inst)
	if err != nil {
		inst.close(ctx)
		compiled.Close(ctx)
		return nil, refuse(ReasonDescribeFailed, "describe: %v", err)
	}
	mod.manifest = man
	mod.family = man.Family
	if err := h.checkManifest(compiled, man); err != nil {
		inst.close(ctx)
		compiled.Close(ctx)
		return nil, err
	}
	mod.methodSpecs = map[string]MethodSpec{}
	mod.noContextCaps = map[string]map[string]bool{}
	for _, ms := range man.Methods {
		mod.methodSpecs[ms.Name] = ms
		mod.noContextCaps[ms.Name] = h.gate.effectiveCaps(man.Capabilities, nil, false, methodCaps(ms))
	}
	mod.pool.addIdle(inst)
	return mod, nil
}

// checkManifest enforces: the manifest's abi is abi.Version; every import from "lemon" is declared;
// every declared host call exists and needs a declared capability; every
// method needs a declared capability; blob specs are sane.
func (h *Host) checkManifest(compiled wazero.CompiledModule, man Manifest) error {
	if man.ABI != abi.Version {
		return refuse(ReasonABIMismatch, "module %s declares ABI %d; rebuild with the current SDK (this node runs ABI %d)", man.Family, man.ABI, abi.Version)
	}
	if man.Family == "" || man.Version == "" {
		return rejected("manifest lacks family or version")
	}
	caps, err := declaredCapabilities(man)
	if err != nil {
		return err
	}
	declared := map[string]bool{"result_read": true}
	for _, name := range man.HostCalls {
		hc, ok := h.hostcall[name]
		if !ok {
			return refuse(ReasonHostCallUnavailable, "module %s needs host call %q", man.Family, name)
		}
		if hc.Capability != hostcalls.CapNone && !caps[hc.Capability] {
			return rejected("module %s uses host call %q without declaring capability %q", man.Family, name, hc.Capability)
		}
		declared[name] = true
	}
	for _, def := range compiled.ImportedFunctions() {
		modName, name, _ := def.Import()
		if modName == "lemon" && !declared[name] {
			return refuse(ReasonImportsNotDeclared, "module %s imports undeclared host call %q", man.Family, name)
		}
		if modName != "lemon" && modName != wasi_snapshot_preview1.ModuleName {
			return refuse(ReasonImportsNotDeclared, "module %s imports from unknown module %q", man.Family, modName)
		}
	}
	if len(man.Methods) == 0 {
		return rejected("module %s serves no methods", man.Family)
	}
	for _, ms := range man.Methods {
		if ms.Name == "" || ms.Version < 1 || !caps[ms.Capability] {
			return rejected("module %s: method %q needs a name, a version and a declared capability", man.Family, ms.Name)
		}
		for field, bs := range ms.InputBlobs {
			if (bs.Encoding != "base64" && bs.Encoding != "string") || bs.MaxBytes <= 0 || field == "" {
				return rejected("module %s: method %s: bad input blob %q", man.Family, ms.Name, field)
			}
		}
	}
	return nil
}

// declaredCapabilities checks a manifest's capability list (at most
// hostcalls.MaxModuleCapabilities names, each hostcalls.CheckCapability)
// and returns it as a set. Names are open: a module may declare its own.
func declaredCapabilities(man Manifest) (map[string]bool, error) {
	if len(man.Capabilities) > hostcalls.MaxModuleCapabilities {
		return nil, rejected("module %s declares %d capabilities (at most %d)", man.Family, len(man.Capabilities), hostcalls.MaxModuleCapabilities)
	}
	caps := map[string]bool{}
	for _, c := range man.Capabilities {
		if err := hostcalls.CheckCapability(c); err != nil {
			return nil, rejected("module %s: %v", man.Family, err)
		}
		caps[c] = true
	}
	return caps, nil
}

// Methods returns every served method and its version
// (worker.Dispatcher): the methods of loaded modules whose declared
// capability is within the node's ceiling. A method the ceiling forbids
// is neither advertised nor run (docs/POLICY.md, "Capabilities").
func (h *Host) Methods() map[string]int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make(map[string]int, len(h.methods))
	for name, m := range h.methods {
		if spec := m.methodSpecs[name]; h.gate.withinCeiling(spec.Capability) {
			out[name] = spec.Version
		}
	}
	return out
}

// Module returns a loaded module by family.
func (h *Host) Module(family string) (*Module, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	m, ok := h.modules[family]
	return m, ok
}

func moduleConfig() wazero.ModuleConfig {
	return wazero.NewModuleConfig().
		WithName("").
		// No start functions: initialize runs the start section's function
		// and _initialize with the stop flag armed (docs/ABI.md, "Instances").
		WithStartFunctions().
		WithSysWalltime().
		WithSysNanotime().
		WithSysNanosleep().
		WithRandSource(rand.Reader).
		WithStdout(io.Discard).
		WithStderr(io.Discard)
}
