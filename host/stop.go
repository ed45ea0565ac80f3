package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"lemon/host/terminate"
)

// stopFlag returns an instance's stop global, added by terminate.Instrument
// (docs/ABI.md, "Instances"), or nil if it is missing.
func stopFlag(mod api.Module) terminate.Flag {
	if g, ok := mod.ExportedGlobal(terminate.StopExport).(api.MutableGlobal); ok {
		return g
	}
	return nil
}

// arm starts a call into the instance: it keeps the instance's memory
// mapped until the call ends (linearMemory.enter) and makes ctx's end set
// the instance's stop flag, so the guest traps (unreachable) within
// terminate.YieldEvery loop iterations; runOnce reports that trap as the
// deadline because ctx has ended. The returned func ends the call; if the
// flag may have been set, it closes the instance, which the pool then
// discards. An instance whose module was closed (Host.Close) answers
// errInstanceClosed and must not be called.
func (inst *instance) arm(ctx context.Context) (func(), error) {
	if !inst.mem.enter() {
		return nil, errInstanceClosed
	}
	release := terminate.Arm(ctx, inst.stop)
	return func() {
		if release() {
			inst.mod.Close(context.WithoutCancel(ctx))
		}
		inst.mem.exit()
	}, nil
}

// errInstanceClosed: a call on an instance whose module was closed.
var errInstanceClosed = errors.New("module instance closed")

// startTimeout bounds a module's start function and _initialize when the
// caller's context has no earlier deadline (docs/RATIONALE.md, "Deadlines").
const startTimeout = 30 * time.Second

// initialize runs what instantiation used to run, with the stop flag armed
// (docs/ABI.md, "Instances"): the module's start function, which
// terminate.Instrument exports as terminate.StartExport instead of leaving
// it to the runtime (it would run before the flag exists), then
// _initialize if exported. Both run under ctx bounded by startTimeout. On
// an error the caller closes mod; errors read as the runtime's did.
func initialize(ctx context.Context, mod api.Module) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	stop := stopFlag(mod)
	for _, name := range [...]string{terminate.StartExport, "_initialize"} {
		fn := mod.ExportedFunction(name)
		if fn == nil {
			continue
		}
		release := terminate.Arm(ctx, stop)
		_, err := fn.Call(ctx)
		fired := release()
		if se, ok := err.(*sys.ExitError); ok {
			// As wazero's InstantiateModule: a start function that exits
			// closes the module; exit code 0 is not an error.
			mod.Close(context.WithoutCancel(ctx))
			if se.ExitCode() == 0 {
				return nil
			}
			return err
		}
		if err != nil {
			if fired {
				return fmt.Errorf("module[] function[%s] failed: %w", name, ctx.Err())
			}
			return fmt.Errorf("module[] function[%s] failed: %w", name, err)
		}
		if fired { // the flag is set: the instance would trap at its next check
			return fmt.Errorf("module[] function[%s]: %w", name, ctx.Err())
		}
	}
	return nil
}
