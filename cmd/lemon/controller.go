package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"lemon/controller"
	"lemon/policies"
	"lemon/version"
)

func init() {
	register("controller", "run the controller (/ws for operators and nodes)", func(args []string) int {
		return runController(args, os.Getenv, os.Stderr)
	})
	setUsage("controller", controllerUsage)
}

const controllerUsage = `usage: lemon controller [--listen ADDR] [--policy controller.toml] [--tls-cert FILE --tls-key FILE]
                        [--state DIR | --memory] [--session-ttl DURATION] [--module-set DIR]
                        [--log-format text|json] [--log-level LEVEL] [--audit-file FILE [--audit-fail-closed]]
                        [--cluster-listen ADDR --cluster-peers ADDR,... [--cluster-name NAME] | --nats URL]
                        [--cluster-secret-file FILE]

Serves /ws for operators and nodes until SIGINT or SIGTERM.

  --listen ADDR        address to listen on (default: the policy's listen, else 127.0.0.1:7777)
  --policy FILE        controller policy TOML file
  --tls-cert, --tls-key  PEM certificate and key: serve wss://
  --state DIR          state directory for the durable registry (default: the policy's state_dir,
                       else $STATE_DIRECTORY, else $XDG_STATE_HOME/lemon, else /var/lib/lemon
                       as root, else ~/.local/state/lemon)
  --memory             keep state in memory only: a restart forgets every paired node
  --session-ttl D      lifetime of a paired node's session, 1s to 168h (default 168h)
  --module-set DIR     pinned module-set directory (default: the policy's module_set, else the set
                       built into this binary; 'lemon modules export DIR' writes that one);
                       SIGHUP re-reads it and re-pins without a restart
  --log-format F       stderr log format: text (default) or json
  --log-level L        debug, info (default), warn or error
  --audit-file FILE    one JSON line per operator request (docs/OPERATIONS.md), rotated at
                       100 MiB keeping 10 files; - writes to stdout
  --audit-fail-closed  refuse requests (UNAVAILABLE audit_unavailable) and answer /readyz 503
                       while the audit file cannot be written

  --cluster-listen ADDR  cluster mode: run an embedded NATS server (JetStream in the state
                       directory) routing to the peers on ADDR (docs/CLUSTER.md)
  --cluster-peers LIST the other controllers' --cluster-listen addresses, comma-separated
  --cluster-name NAME  this controller's unique name (default: hostname and --cluster-listen)
  --nats URL           cluster mode on an external NATS cluster instead of the embedded server
  --cluster-secret-file FILE  the cluster secret (default $LEMON_CLUSTER_SECRET_FILE, else
                       $LEMON_CLUSTER_SECRET); routes and clients without it are refused

The same listener serves /healthz, /readyz and /metrics (Prometheus).

The operator token comes from LEMON_CONTROL_PLANE_OPERATOR_TOKEN or the policy's [[operators]];
without one the controller listens on loopback only.
`

// runController is `lemon controller`: it serves until SIGINT or SIGTERM;
// SIGHUP re-pins the --module-set directory (see watchRepin).
// Messages go to stderr; the exit code is 0, 1 (failure) or 2 (usage).
func runController(args []string, getenv func(string) string, stderr io.Writer) int {
	fs := flag.NewFlagSet("lemon controller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "address to listen on (default: policy listen, else 127.0.0.1:7777)")
	policyFile := fs.String("policy", "", "controller policy TOML file")
	tlsCert := fs.String("tls-cert", "", "PEM certificate file (serve wss://)")
	tlsKey := fs.String("tls-key", "", "PEM private key file")
	stateDir := fs.String("state", "", "state directory for the durable registry (default: policy state_dir, else $STATE_DIRECTORY, $XDG_STATE_HOME/lemon, /var/lib/lemon as root, ~/.local/state/lemon)")
	memory := fs.Bool("memory", false, "keep state in memory only (a restart forgets every paired node)")
	sessionTTL := fs.Duration("session-ttl", 0, "lifetime of a paired node's session, 1s to 168h (default 168h: 7 days); shorten it only to force re-pairing sooner")
	moduleSet := fs.String("module-set", "", "pinned module-set directory (default: policy module_set, else the set built into this binary)")
	obs := addObsFlags(fs, "controller", "info")
	cf := addClusterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := obs.check(); err != nil {
		fmt.Fprintf(stderr, "lemon controller: %v\n", err)
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "lemon controller: unexpected arguments")
		return 2
	}
	pol := &policies.Controller{}
	if *policyFile != "" {
		p, err := policies.LoadController(*policyFile)
		if err != nil {
			fmt.Fprintf(stderr, "lemon controller: %v\n", err)
			return 1
		}
		pol = p
	} else if err := pol.Validate(); err != nil {
		fmt.Fprintf(stderr, "lemon controller: %v\n", err)
		return 1
	}
	if *tlsCert != "" || *tlsKey != "" {
		if *tlsCert == "" || *tlsKey == "" {
			fmt.Fprintln(stderr, "lemon controller: --tls-cert and --tls-key go together")
			return 2
		}
		pol.TLS = policies.ControllerTLS{CertFile: *tlsCert, KeyFile: *tlsKey}
	}
	if *memory && *stateDir != "" {
		fmt.Fprintln(stderr, "lemon controller: --memory and --state exclude each other")
		return 2
	}
	switch {
	case *memory:
		pol.StateDir = ""
	case *stateDir != "":
		pol.StateDir = *stateDir
	case pol.StateDir == "":
		// Durable by default (docs/DEPLOY.md, "State directory").
		dir, err := defaultControllerState(getenv, geteuid())
		if err != nil {
			fmt.Fprintf(stderr, "lemon controller: %v\n", err)
			return 1
		}
		pol.StateDir = dir
	}
	if pol.StateDir == "" {
		obs.notice(stderr, "lemon controller", "state in memory only (--memory): a restart forgets every paired node",
			"state in memory only (--memory): a restart forgets every paired node", "memory", true)
	} else {
		obs.notice(stderr, "lemon controller", "state in "+pol.StateDir, "state directory", "dir", pol.StateDir)
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
	cfg, err := controller.FromPolicy(pol, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "lemon controller: %v\n", err)
		return 1
	}
	cfg.Version = version.Version
	cfg.SessionTTL = *sessionTTL
	cfg.Logger = obs.logger(stderr, obs.logLevel)
	if cfg.Audit, err = obs.openAudit(); err != nil {
		fmt.Fprintf(stderr, "lemon controller: %v\n", err)
		return 1
	}
	defer cfg.Audit.Close()
	if cfg.ModuleSet == nil {
		// docs/PROTOCOL.md, "Module set": nodes serve only what the controller pins. Without a
		// module_set in the policy the controller pins the set built into
		// this binary.
		m, mods, err := loadModuleSet("")
		if err != nil {
			fmt.Fprintf(stderr, "lemon controller: %v\n", err)
			return 1
		}
		if cfg.ModuleSet, err = controller.NewModuleSet(m, mods); err != nil {
			fmt.Fprintf(stderr, "lemon controller: %v\n", err)
			return 1
		}
	}
	stopCluster, err := cf.setup(&cfg, pol.StateDir)
	if err != nil {
		fmt.Fprintf(stderr, "lemon controller: %v\n", err)
		return 1
	}
	defer stopCluster()
	if cfg.Cluster != nil {
		// controller.New waits until the KV buckets can be created, which
		// takes the JetStream leader elections (docs/CLUSTER.md).
		obs.notice(stderr, "lemon controller", "waiting for the cluster's JetStream (peers, buckets)",
			"waiting for the cluster's JetStream", "cluster", cfg.Cluster.Name)
	}
	srv, err := controller.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "lemon controller: %v\n", err)
		return 1
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "lemon controller: cannot listen on %s: %v\n", addr, listenReason(err))
		return 1
	}
	if len(cfg.Operators) == 0 && !controller.IsLoopback(ln.Addr()) {
		ln.Close()
		fmt.Fprintf(stderr, "lemon controller: refusing to listen on non-loopback %s without operator authentication (set %s or add [[operators]] to the policy)\n",
			addr, controller.EnvOperatorToken)
		return 1
	}
	scheme := "ws"
	if cfg.TLS != nil {
		scheme = "wss"
	}
	wsURL := fmt.Sprintf("%s://%s/ws", scheme, ln.Addr())
	obs.notice(stderr, "lemon controller", "listening on "+wsURL, "listening", "url", wsURL)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// SIGHUP re-reads the module-set directory and re-pins it (docs/PLUGINS.md).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go watchRepin(ctx, "lemon controller", hup, srv, pol.ModuleSet, stderr, &sync.Mutex{})
	if err := srv.Serve(ctx, ln); err != nil {
		fmt.Fprintf(stderr, "lemon controller: %v\n", err)
		return 1
	}
	return 0
}

// listenReason is the operating system's reason a listen failed ("bind:
// address already in use", "bind: permission denied"), without Go's
// "listen tcp ADDR:" prefix the caller already prints.
func listenReason(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}
