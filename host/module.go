package host

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"lemon/host/abi"
	"lemon/host/terminate"
	"lemon/hostcalls"
)

// Manifest and MethodSpec are the ABI's declarations (docs/ABI.md).
type (
	Manifest   = abi.Manifest
	MethodSpec = abi.MethodSpec
)

// Module is one loaded family: its compiled code, manifest and pool.
type Module struct {
	host        *Host
	compiled    wazero.CompiledModule
	manifest    Manifest
	family      string
	sha256      string
	methodSpecs map[string]MethodSpec
	// noContextCaps are each method's effective capabilities for a request
	// without an execution context (they depend on nothing else), computed
	// once at load instead of per request.
	noContextCaps map[string]map[string]bool
	pool          *pool
	// okMetrics caches each host call's success collectors for this
	// module (*hostcalls.HostCall → *callMetrics), made on first use.
	okMetrics sync.Map
}

// callMetrics returns the module's success collectors for hc.
func (m *Module) callMetrics(hc *hostcalls.HostCall) *callMetrics {
	if c, ok := m.okMetrics.Load(hc); ok {
		return c.(*callMetrics)
	}
	c, _ := m.okMetrics.LoadOrStore(hc, m.host.gate.metrics.forCall(m.family, hc.Name))
	return c.(*callMetrics)
}

// effectiveCaps returns the capabilities a request for method may use:
// precomputed without a context, else manifest ∩ ceiling ∩ context ∩
// method (Gate.effectiveCaps). The map is read-only.
func (m *Module) effectiveCaps(method string, bound boundContext) map[string]bool {
	if !bound.present {
		if caps, ok := m.noContextCaps[method]; ok {
			return caps
		}
	}
	return m.host.gate.effectiveCaps(m.manifest.Capabilities, bound.caps, bound.present, methodCaps(m.methodSpecs[method]))
}

// Manifest returns what the module declared.
func (m *Module) Manifest() Manifest { return m.manifest }

// instance is one live module instance; one invocation at a time.
type instance struct {
	mod    api.Module
	mem    *linearMemory // nil for a module without memory
	stderr *tailBuffer   // this instance's stderr, emptied per invocation
	malloc api.Function
	invoke api.Function
	stop   terminate.Flag // the deadline sets it (stop.go)
	calls  int
	// input and inputCap are the guest's invocation buffer (lemon_input;
	// 0 when the module has none); mallocs counts lemon_malloc calls.
	input, inputCap uint32
	mallocs         int
}

func (i *instance) close(ctx context.Context) { i.mod.Close(ctx) }

// pool keeps idle instances of one module and bounds live ones.
type pool struct {
	m     *Module
	slots chan struct{} // one token per live instance allowed
	mu    sync.Mutex
	idle  []*instance
	// Created and discarded count instances for tests and metrics.
	created, discarded int
	// starting counts instance starts in progress (get and refill), so a
	// spare is started only while created - discarded + starting stays
	// below PoolSize. refilling: a background start is in progress (at
	// most one per module; it holds a slot until its instance is idle).
	// closed: close ran, so an instance started afterwards is closed, not
	// kept.
	starting          int
	refilling, closed bool
	refills           sync.WaitGroup
}

func newPool(m *Module, size int) *pool {
	return &pool{m: m, slots: make(chan struct{}, size)}
}

// instantiate creates a fresh instance (not counted against slots: the
// caller holds one).
func (p *pool) instantiate(ctx context.Context) (*instance, error) {
	stderr := &tailBuffer{}
	var mem *linearMemory
	actx := experimental.WithMemoryAllocator(context.WithoutCancel(ctx), experimental.MemoryAllocatorFunc(
		func(capBytes, maxBytes uint64) experimental.LinearMemory {
			mem = newLinearMemory(capBytes, maxBytes)
			return mem
		}))
	mod, err := p.m.host.runtime.InstantiateModule(actx, p.m.compiled, moduleConfig().WithStderr(stderr))
	if err != nil {
		return nil, err
	}
	if testInstantiated != nil {
		testInstantiated(mod)
	}
	// The module is in the runtime's store now, so Host.Close (closing
	// the runtime) may already have closed it and unmapped its memory:
	// initialize must not run on it then.
	if !mem.enter() {
		mod.Close(context.WithoutCancel(ctx))
		return nil, errInstanceClosed
	}
	err = initialize(ctx, mod)
	mem.exit()
	if err != nil {
		mod.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	inst := &instance{mod: mod, mem: mem, stderr: stderr, malloc: mod.ExportedFunction("lemon_malloc"), invoke: mod.ExportedFunction("lemon_invoke"), stop: stopFlag(mod)}
	if inst.malloc == nil || inst.invoke == nil || mod.ExportedFunction("lemon_describe") == nil {
		mod.Close(ctx)
		return nil, fmt.Errorf("missing ABI exports")
	}
	if in := mod.ExportedFunction("lemon_input"); in != nil {
		release, err := inst.arm(ctx)
		if err != nil {
			mod.Close(ctx)
			return nil, err
		}
		r, err := in.Call(ctx)
		release()
		if err != nil || len(r) != 1 {
			mod.Close(ctx)
			return nil, fmt.Errorf("lemon_input failed")
		}
		// A buffer outside the memory is ignored: invocations then go
		// through lemon_malloc.
		ptr, size := uint32(r[0]>>32), uint32(r[0])
		if _, ok := mod.Memory().Read(ptr, size); ok && ptr != 0 {
			inst.input, inst.inputCap = ptr, size
		}
	}
	v := mod.ExportedFunction("lemon_abi_version")
	if v == nil {
		mod.Close(ctx)
		return nil, fmt.Errorf("missing lemon_abi_version")
	}
	release, err := inst.arm(ctx)
	if err != nil {
		mod.Close(ctx)
		return nil, err
	}
	r, err := v.Call(ctx)
	release()
	if err != nil || len(r) != 1 {
		mod.Close(ctx)
		return nil, fmt.Errorf("lemon_abi_version failed")
	}
	if got := api.DecodeI32(r[0]); got != abi.Version {
		mod.Close(ctx)
		return nil, &abiMismatch{got: got}
	}
	p.mu.Lock()
	p.created++
	p.mu.Unlock()
	return inst, nil
}

// testInstantiated, when set (export_test.go), sees every module right
// after InstantiateModule returns it.
var testInstantiated func(api.Module)

// get returns an idle instance or a new one, waiting for a slot.
func (p *pool) get(ctx context.Context) (*instance, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		inst := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return inst, nil
	}
	p.starting++
	p.mu.Unlock()
	inst, err := p.instantiate(ctx)
	p.mu.Lock()
	p.starting--
	p.mu.Unlock()
	if err != nil {
		<-p.slots
		return nil, err
	}
	return inst, nil
}

// put returns an instance after an invocation and releases its slot. The
// instance is closed instead when it reached its recycle limits (calls or
// memory pages) or was closed by a trap. Module starts (about 8 ms for a
// Go guest) happen off the request path where the bounds allow
// (docs/RATIONALE.md, "Instances are replaced off the request path"): an
// instance within a quarter of RecycleAfterCalls of its limit gets a
// spare started in the background when live instances stay within
// PoolSize, and an instance recycled with no other idle instance is
// replaced in the background.
func (p *pool) put(ctx context.Context, inst *instance) {
	cfg := p.m.host.cfg
	inst.calls++
	closed := inst.mod.IsClosed()
	discard := closed || inst.calls >= cfg.RecycleAfterCalls ||
		inst.mod.Memory() == nil || inst.mod.Memory().Size()/65536 > cfg.RecycleAfterPages
	margin := cfg.RecycleAfterCalls / 4
	refill := false
	p.mu.Lock()
	if discard {
		p.discarded++
	} else {
		p.idle = append(p.idle, inst)
	}
	// A trapped (closed) instance is not replaced ahead of need: the next
	// request starts one, as after any trap.
	if !closed && !p.refilling && !p.closed {
		live := p.created - p.discarded + p.starting
		switch {
		case discard:
			refill = len(p.idle) == 0 // this slot's instance is gone: live < PoolSize
		case margin > 0 && inst.calls >= cfg.RecycleAfterCalls-margin:
			refill = live < cap(p.slots)
		}
	}
	if refill {
		p.refilling = true
		p.starting++
		p.refills.Add(1)
	}
	p.mu.Unlock()
	if discard {
		inst.close(context.WithoutCancel(ctx))
	}
	if refill {
		go p.refill() // keeps this slot until the new instance is idle
		return
	}
	<-p.slots
}

// refill starts one instance while holding the slot of the request that
// asked for it (so starts in progress and instances in use stay within
// PoolSize), puts it at the bottom of the idle list (the instances in use
// keep being taken first, up to their recycle) and releases the slot. A
// failed start is dropped: the next request that finds no idle instance
// starts one itself and reports its failure.
func (p *pool) refill() {
	defer p.refills.Done()
	inst, err := p.instantiate(context.Background())
	p.mu.Lock()
	p.refilling = false
	p.starting--
	keep := err == nil && !p.closed
	if keep {
		p.idle = append(p.idle, nil)
		copy(p.idle[1:], p.idle)
		p.idle[0] = inst
	} else if err == nil {
		p.discarded++
	}
	p.mu.Unlock()
	if err == nil && !keep {
		inst.close(context.Background())
	}
	<-p.slots
}

// addIdle adds a fresh instance (the one used to describe the module).
func (p *pool) addIdle(inst *instance) {
	p.mu.Lock()
	p.idle = append(p.idle, inst)
	p.mu.Unlock()
}

// drop closes an instance that failed (trap or deadline).
func (p *pool) drop(ctx context.Context, inst *instance) {
	inst.close(context.WithoutCancel(ctx))
	p.mu.Lock()
	p.discarded++
	p.mu.Unlock()
	<-p.slots
}

func (p *pool) close(ctx context.Context) {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.refills.Wait() // a replacement being started finishes (and is closed) first
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, inst := range idle {
		inst.close(ctx)
	}
	p.m.compiled.Close(ctx)
}

// Stats reports instances created and discarded so far.
func (m *Module) Stats() (created, discarded int) {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	return m.pool.created, m.pool.discarded
}

// readPacked reads the ptr<<32|len result of an export.
func readPacked(inst *instance, packed uint64) ([]byte, error) {
	ptr, n := uint32(packed>>32), uint32(packed)
	b, ok := inst.mod.Memory().Read(ptr, n)
	if !ok {
		return nil, fmt.Errorf("result out of bounds")
	}
	return append([]byte(nil), b...), nil
}

func describe(ctx context.Context, inst *instance) (Manifest, error) {
	release, err := inst.arm(ctx)
	if err != nil {
		return Manifest{}, err
	}
	defer release()
	r, err := inst.mod.ExportedFunction("lemon_describe").Call(ctx)
	if err != nil {
		return Manifest{}, err
	}
	b, err := readPacked(inst, r[0])
	if err != nil {
		return Manifest{}, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("manifest is not valid JSON")
	}
	return m, nil
}

// call runs one lemon_invoke on inst with input JSON.
func (inst *instance) call(ctx context.Context, input []byte) ([]byte, error) {
	release, err := inst.arm(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	if inst.stderr != nil {
		inst.stderr.reset()
	}
	ptr := inst.input
	if uint64(len(input)) > uint64(inst.inputCap) {
		inst.mallocs++
		r, err := inst.malloc.Call(ctx, uint64(len(input)))
		if err != nil {
			return nil, err
		}
		ptr = api.DecodeU32(r[0])
	}
	if !inst.mod.Memory().Write(ptr, input) {
		return nil, fmt.Errorf("input out of bounds")
	}
	r, err := inst.invoke.Call(ctx, uint64(ptr), uint64(len(input)))
	if err != nil {
		return nil, err
	}
	return readPacked(inst, r[0])
}

// abiMismatch is a module built for another ABI version than the host's
// (abi.Version); the host refuses it at load (docs/ABI.md, "Versions").
type abiMismatch struct{ got int32 }

func (e *abiMismatch) Error() string {
	return fmt.Sprintf("module built for ABI %d; rebuild with the current SDK (this node runs ABI %d)", e.got, abi.Version)
}
