package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"lemon/controller"
	"lemon/host/moduleset/defaultset"
	"lemon/policies"
	"lemon/version"
)

func init() {
	register("controller", "run the controller (/ws for operators and nodes)", runController)
}

func runController(args []string) int {
	fs := flag.NewFlagSet("lemon controller", flag.ContinueOnError)
	listen := fs.String("listen", "", "address to listen on (default: policy listen, else 127.0.0.1:7777)")
	policyFile := fs.String("policy", "", "controller policy TOML file")
	tlsCert := fs.String("tls-cert", "", "PEM certificate file (serve wss://)")
	tlsKey := fs.String("tls-key", "", "PEM private key file")
	stateDir := fs.String("state", "", "state directory for the durable registry (default: policy state_dir, else memory only)")
	sessionTTL := fs.Duration("session-ttl", 0, "lifetime of a paired node's session, 1s to 168h (default 168h: 7 days); shorten it only to force re-pairing sooner")
	moduleSet := fs.String("module-set", "", "pinned module-set directory (default: policy module_set, else the set built into this binary)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "lemon controller: unexpected arguments")
		return 2
	}
	pol := &policies.Controller{}
	if *policyFile != "" {
		p, err := policies.LoadController(*policyFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "lemon controller: %v\n", err)
			return 1
		}
		pol = p
	} else if err := pol.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "lemon controller: %v\n", err)
		return 1
	}
	if *tlsCert != "" || *tlsKey != "" {
		if *tlsCert == "" || *tlsKey == "" {
			fmt.Fprintln(os.Stderr, "lemon controller: --tls-cert and --tls-key go together")
			return 2
		}
		pol.TLS = policies.ControllerTLS{CertFile: *tlsCert, KeyFile: *tlsKey}
	}
	if *stateDir != "" {
		pol.StateDir = *stateDir
	}
	if *moduleSet != "" {
		pol.ModuleSet = *moduleSet
	}
	addr := *listen
	if addr == "" {
		addr = pol.Listen
	}
	if addr == "" {
		addr = "127.0.0.1:7777"
	}
	cfg, err := controller.FromPolicy(pol, os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lemon controller: %v\n", err)
		return 1
	}
	cfg.Version = version.Version
	cfg.SessionTTL = *sessionTTL
	if cfg.ModuleSet == nil {
		// DESIGN §8: nodes serve only what the controller pins. Without a
		// module_set in the policy the controller pins the set built into
		// this binary.
		m, mods, err := defaultset.Load()
		if err != nil {
			fmt.Fprintf(os.Stderr, "lemon controller: %v\n", err)
			return 1
		}
		if cfg.ModuleSet, err = controller.NewModuleSet(m, mods); err != nil {
			fmt.Fprintf(os.Stderr, "lemon controller: %v\n", err)
			return 1
		}
	}
	srv, err := controller.New(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lemon controller: %v\n", err)
		return 1
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lemon controller: cannot listen on %s\n", addr)
		return 1
	}
	if len(cfg.Operators) == 0 && !controller.IsLoopback(ln.Addr()) {
		ln.Close()
		fmt.Fprintf(os.Stderr, "lemon controller: refusing to listen on non-loopback %s without operator authentication (set %s or add [[operators]] to the policy)\n",
			addr, controller.EnvOperatorToken)
		return 1
	}
	scheme := "ws"
	if cfg.TLS != nil {
		scheme = "wss"
	}
	fmt.Fprintf(os.Stderr, "lemon controller: listening on %s://%s/ws\n", scheme, ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.Serve(ctx, ln); err != nil {
		fmt.Fprintf(os.Stderr, "lemon controller: %v\n", err)
		return 1
	}
	return 0
}
