package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"lemon/host"
	"lemon/host/conformance"
	"lemon/plugins"
)

func init() {
	register("plugin", "build, inspect and run conformance cases on modules", runPlugin)
}

const pluginUsage = `usage:
  lemon plugin build DIR -o OUT.wasm       build a Go plugin package as a wasip1 reactor module
  lemon plugin inspect MODULE.wasm         print the module's manifest and sha256
  lemon plugin conformance MODULE.wasm [--cases DIR]
                                           run the family's conformance cases against the module`

func runPlugin(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, pluginUsage)
		return 2
	}
	switch args[0] {
	case "build":
		return pluginBuild(args[1:])
	case "inspect":
		return pluginInspect(args[1:])
	case "conformance":
		return pluginConformance(args[1:])
	}
	fmt.Fprintln(os.Stderr, pluginUsage)
	return 2
}

func pluginBuild(args []string) int {
	fs := flag.NewFlagSet("plugin build", flag.ContinueOnError)
	out := fs.String("o", "", "output .wasm file")
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, pluginUsage)
		return 2
	}
	dir := args[0]
	if err := fs.Parse(args[1:]); err != nil || *out == "" {
		fmt.Fprintln(os.Stderr, pluginUsage)
		return 2
	}
	abs, err := filepath.Abs(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lemon plugin build:", err)
		return 1
	}
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-buildvcs=false", "-o", abs, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "lemon plugin build: go build failed")
		return 1
	}
	return pluginInspect([]string{abs})
}

func pluginInspect(args []string) int {
	wasm, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "lemon plugin inspect:", err)
		return 1
	}
	man, err := host.Inspect(context.Background(), wasm)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lemon plugin inspect:", err)
		return 1
	}
	sum := sha256.Sum256(wasm)
	out, _ := json.MarshalIndent(struct {
		SHA256   string        `json:"sha256"`
		Size     int           `json:"size"`
		Manifest host.Manifest `json:"manifest"`
	}{hex.EncodeToString(sum[:]), len(wasm), man}, "", "  ")
	fmt.Println(string(out))
	return 0
}

func pluginConformance(args []string) int {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, pluginUsage)
		return 2
	}
	fs := flag.NewFlagSet("plugin conformance", flag.ContinueOnError)
	casesDir := fs.String("cases", "", "directory of case files (default: the embedded cases of the module's family)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 1 {
		fmt.Fprintln(os.Stderr, pluginUsage)
		return 2
	}
	ctx := context.Background()
	wasm, err := os.ReadFile(pos[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "lemon plugin conformance:", err)
		return 1
	}
	man, err := host.Inspect(ctx, wasm)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lemon plugin conformance:", err)
		return 1
	}
	var files []conformance.File
	if *casesDir != "" {
		if files, err = conformance.LoadDir(*casesDir); err == nil && len(files) == 0 {
			err = fmt.Errorf("no *.json case files in %s", *casesDir)
		}
	} else if fsys := plugins.Conformance(man.Family); fsys != nil {
		files, err = conformance.LoadFS(fsys)
	} else {
		err = fmt.Errorf("no built-in cases for family %q; pass --cases DIR", man.Family)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lemon plugin conformance:", err)
		return 1
	}
	cache, err := os.MkdirTemp("", "lemon-conformance-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "lemon plugin conformance:", err)
		return 1
	}
	defer os.RemoveAll(cache)
	r := &conformance.Runner{Wasm: wasm, CacheDir: cache}
	passed, failed := 0, 0
	for _, f := range files {
		if f.Family != man.Family {
			continue
		}
		for _, res := range r.RunFile(ctx, f) {
			if res.Err != nil {
				failed++
				fmt.Printf("FAIL %s / %s: %v\n", res.File, res.Case, res.Err)
			} else {
				passed++
				fmt.Printf("ok   %s / %s\n", res.File, res.Case)
			}
		}
	}
	fmt.Printf("conformance: %d passed, %d failed\n", passed, failed)
	if failed > 0 || passed == 0 {
		return 1
	}
	return 0
}
