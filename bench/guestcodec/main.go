// Command guestcodec measures the guest's cost of decoding host-call
// results, JSON (ABI v2) against binary (ABI v3): it builds
// bench/guestcodec/guest for wasip1, rewrites it with the host's deadline
// checks (host/terminate.Instrument, as every module runs) unless
// -nochecks, and runs it under wazero, which prints µs per decode
// (docs/BENCHMARKS.md, "Binary host-call results").
//
//	go run ./bench/guestcodec [-nochecks]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"lemon/host/terminate"
)

func main() {
	nochecks := flag.Bool("nochecks", false, "run the guest without the deadline checks")
	flag.Parse()
	if err := run(*nochecks); err != nil {
		fmt.Fprintln(os.Stderr, "guestcodec:", err)
		os.Exit(1)
	}
}

func run(nochecks bool) error {
	dir, err := os.MkdirTemp("", "guestcodec")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "guest.wasm")
	build := exec.Command("go", "build", "-trimpath", "-o", out, "./bench/guestcodec/guest")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build the guest (run from the repository root): %w", err)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	if !nochecks {
		if wasm, err = terminate.Instrument(wasm); err != nil {
			return err
		}
	}
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	cfg := wazero.NewModuleConfig().WithStdout(os.Stdout).WithStderr(os.Stderr).WithSysWalltime().WithSysNanotime().WithStartFunctions()
	mod, err := r.InstantiateWithConfig(ctx, wasm, cfg)
	if err != nil {
		return err
	}
	if f := mod.ExportedFunction(terminate.StartExport); f != nil {
		if _, err := f.Call(ctx); err != nil {
			return err
		}
	}
	_, err = mod.ExportedFunction("_start").Call(ctx)
	if err != nil && err.Error() != "module closed with exit_code(0)" {
		return err
	}
	return nil
}
