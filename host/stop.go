package host

import (
	"context"

	"github.com/tetratelabs/wazero/api"

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

// arm makes ctx's end set the instance's stop flag, so the guest traps
// (unreachable) within terminate.YieldEvery loop iterations; runOnce reports that trap as the
// deadline because ctx has ended. The returned func disarms it; if the flag
// may have been set, it closes the instance, which the pool then discards.
func (inst *instance) arm(ctx context.Context) func() {
	release := terminate.Arm(ctx, inst.stop)
	return func() {
		if release() {
			inst.mod.Close(context.WithoutCancel(ctx))
		}
	}
}
