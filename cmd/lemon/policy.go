package main

import (
	"fmt"
	"os"

	"lemon/policies"
)

func init() {
	register("policy", "check a worker or controller policy and print the effective policy", runPolicy)
}

// runPolicy implements `lemon policy check [--controller|--worker] FILE`.
// Without a flag the file is tried as a worker policy, then as a
// controller policy; the errors of both are shown if neither fits.
func runPolicy(args []string) int {
	if len(args) < 2 || args[0] != "check" {
		fmt.Fprintln(os.Stderr, "usage: lemon policy check [--worker|--controller] FILE")
		return 2
	}
	kind, file := "", args[len(args)-1]
	if len(args) == 3 {
		kind = args[1]
	}
	if kind == "" || kind == "--worker" {
		w, werr := policies.LoadWorker(file)
		if werr == nil {
			fmt.Print(w.String())
			return 0
		}
		if kind == "--worker" {
			fmt.Fprintln(os.Stderr, "worker policy:", werr)
			return 1
		}
		c, cerr := policies.LoadController(file)
		if cerr == nil {
			fmt.Print(c.String())
			return 0
		}
		fmt.Fprintf(os.Stderr, "not a valid worker policy: %v\nnot a valid controller policy: %v\n", werr, cerr)
		return 1
	}
	if kind != "--controller" {
		fmt.Fprintln(os.Stderr, "usage: lemon policy check [--worker|--controller] FILE")
		return 2
	}
	c, err := policies.LoadController(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller policy:", err)
		return 1
	}
	fmt.Print(c.String())
	return 0
}
