package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"lemon/controller"
)

// watchRepin re-reads the module-set directory dir at each signal on sig
// (SIGHUP for `lemon controller` and `lemon dev`; who names it in the
// line) and re-pins srv to it
// (controller.Server.SetModuleSet). A set that fails to load or verify is
// refused, with a line on out saying why, and the pinned set keeps
// serving. Without a directory (the binary's built-in set) there is
// nothing to re-read and the signal is only logged. It returns when ctx
// ends.
func watchRepin(ctx context.Context, who string, sig <-chan os.Signal, srv *controller.Server, dir string, out io.Writer, mu *sync.Mutex) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
		}
		msg := repin(srv, dir)
		mu.Lock()
		fmt.Fprintln(out, who+": "+msg)
		mu.Unlock()
	}
}

// repin loads dir and pins it; the result is one line for the log.
func repin(srv *controller.Server, dir string) string {
	if dir == "" {
		return "SIGHUP: no module-set directory is pinned (the built-in set is served); nothing to re-read"
	}
	ms, err := controller.LoadModuleSetDir(dir)
	if err != nil {
		return fmt.Sprintf("SIGHUP: module set %s refused, the pinned set %s keeps serving: %v", dir, srv.ModuleSet().Digest(), err)
	}
	if old := srv.ModuleSet(); old != nil && old.Digest() == ms.Digest() {
		if err := srv.SetModuleSet(ms); err != nil {
			return fmt.Sprintf("SIGHUP: module set refused: %v", err)
		}
		return "SIGHUP: module set " + ms.Digest() + " re-read (digest unchanged)"
	}
	if err := srv.SetModuleSet(ms); err != nil {
		return fmt.Sprintf("SIGHUP: module set refused: %v", err)
	}
	return "SIGHUP: re-pinned module set " + ms.Digest() + " from " + dir + "; nodes are told to switch"
}
