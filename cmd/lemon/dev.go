package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"lemon/controller"
	"lemon/policies"
	"lemon/protocol"
	"lemon/version"
	"lemon/worker"
)

func init() {
	register("dev", "run a controller and one node on loopback, for trying lemon", func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runDev(ctx, args, os.Getenv, os.Stdout, os.Stderr)
	})
	setUsage("dev", devUsage)
}

const devUsage = `usage: lemon dev [--listen 127.0.0.1:PORT] [--name NAME] [--cwd DIR] [--allowed-root DIR]...
                 [--capabilities LIST] [--policy worker.toml] [--state DIR] [--module-set DIR]
                 [--log-level debug|info|warn|error] [--operators controller.toml]

Runs a controller on a loopback address and one node (default cwd: the
current directory) joined to it with an interim node token, and prints the
operator token (LEMON_CONTROL_PLANE_OPERATOR_TOKEN, or a generated one) with
a lemon call line to try. Ctrl-C stops both.

--module-set DIR pins that module-set directory (manifest.json plus modules,
as 'lemon modules export DIR' and 'lemon plugin build --set DIR' write it)
instead of the set built into this binary; the node starts on it too.
SIGHUP re-reads that directory and re-pins it without a restart (the node
switches to it), so a rebuilt module is picked up with 'kill -HUP PID'.

--log-level sets what reaches stderr (default warn). A module's own
log records (plugins/sdk/log) are logged at their level: use
--log-level debug or info to see log.Debug or log.Info lines;
--log-format json writes them as JSON.

--audit-file FILE writes the controller's record of each request and the
node's record of each host call to one file (- for stdout), joined by
invokeId; --audit-fail-closed refuses requests while it cannot be written.
--metrics-listen ADDR serves the node's /metrics, /healthz and /readyz; the
controller serves its own on --listen (docs/OPERATIONS.md).

--operators FILE adds the [[operators]] entries of a controller policy file
(names, scopes, token_env or token_sha256) beside dev's own operator, e.g. a
read-only or a pairing-only token; the file's other keys are not used. The
web console is at http://ADDR/ui/ (docs/CONSOLE.md).
`

func randomToken(prefix string) string {
	b := make([]byte, 24)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func runDev(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if nodeUnsupported("lemon dev", stderr) {
		return 1
	}
	fs := flag.NewFlagSet("lemon dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, devUsage) }
	listen := fs.String("listen", "127.0.0.1:7777", "loopback address of the controller")
	o := &nodeOptions{}
	fs.StringVar(&o.name, "name", "dev", "node name")
	fs.StringVar(&o.cwd, "cwd", "", "node default cwd (default: the current directory)")
	fs.Var(&o.roots, "allowed-root", "extra allowed file root, added to home (repeatable)")
	fs.StringVar(&o.capabilities, "capabilities", "", "capability ceiling (default: the policy's, else all)")
	fs.StringVar(&o.policy, "policy", "", "worker policy TOML file")
	fs.StringVar(&o.state, "state", "", "node state directory (default: ~/.lemon/dev/NAME)")
	setDir := fs.String("module-set", "", "module-set directory to pin (default: the set built into this binary)")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error: what reaches stderr")
	operators := fs.String("operators", "", "controller policy TOML whose [[operators]] are added")
	obs := addObsFlags(fs, "dev", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := obs.check(); err != nil {
		fmt.Fprintf(stderr, "lemon dev: %v\n", err)
		return 2
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "lemon dev: %v\n", err)
		return 1
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "lemon dev: --log-level must be debug, info, warn or error\n")
		return 2
	}
	log := obs.logger(stderr, level.String())
	sink, err := obs.openAudit()
	if err != nil {
		return fail(err)
	}
	defer sink.Close()
	reg := worker.NewMetricsRegistry()

	m, mods, err := loadModuleSet(*setDir)
	if err != nil {
		return fail(err)
	}
	pinned, err := controller.NewModuleSet(m, mods)
	if err != nil {
		return fail(err)
	}
	initial, err := worker.NewModuleSet(m, mods)
	if err != nil {
		return fail(err)
	}
	// lemon dev is for trying things in the directory you are in: without
	// a policy file the cwd is an allowed root too (a plain node grants
	// home and --allowed-root only); with one, the file's roots bound it.
	pol, cwd, roots, err := nodeLayers(o, os.Getenv, true)
	if err != nil {
		return fail(err)
	}
	// State (compilation cache, module cache, store) persists under
	// ~/.lemon/dev/NAME so a restart does not recompile the modules.
	state := o.state
	if state == "" {
		if home, herr := os.UserHomeDir(); herr == nil && home != "" {
			state = filepath.Join(home, ".lemon", "dev", sanitizeName(o.name))
		} else {
			if state, err = os.MkdirTemp("", "lemon-dev-"); err != nil {
				return fail(errors.New("cannot create a state directory; pass --state"))
			}
			defer os.RemoveAll(state)
		}
	}

	// Every family works out of the box: without a vault key in the
	// policy, dev keeps a generated one (0600) in its state directory.
	if pol.Vault == (policies.VaultKey{}) {
		key, err := devVaultKey(state)
		if err != nil {
			return fail(err)
		}
		pol.Vault.KeyFile = key
	}

	opToken := getenv(envControlPlaneToken)
	generated := opToken == ""
	if generated {
		opToken = randomToken("lop_")
	}
	nodeToken := randomToken("lnt_")
	ops := []controller.OperatorCredential{{Name: "dev", TokenHash: controller.HashToken(opToken),
		Scopes: append([]string(nil), protocol.OperatorScopes...)}}
	if *operators != "" {
		extra, err := devOperators(*operators, getenv)
		if err != nil {
			return fail(err)
		}
		ops = append(ops, extra...)
	}
	srv, err := controller.New(controller.Config{
		Operators:  ops,
		NodeTokens: []controller.NodeCredential{{Name: o.name, TokenHash: controller.HashToken(nodeToken)}},
		ModuleSet:  pinned,
		Version:    version.Version,
		Logger:     log,
		Audit:      sink,
	})
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		srv.Close()
		return fail(fmt.Errorf("cannot listen on %s: %v", *listen, listenReason(err)))
	}
	if !controller.IsLoopback(ln.Addr()) {
		ln.Close()
		srv.Close()
		return fail(errors.New("--listen must be a loopback address"))
	}
	url := "ws://" + ln.Addr().String() + "/ws"

	nh, err := worker.NewNodeHost(worker.HostOptions{Policy: pol, DefaultCwd: cwd, Roots: roots,
		StateDir: state, MaxPayload: protocol.DefaultMaxPayload, Logger: log, Registry: reg, Audit: sink})
	if err != nil {
		ln.Close()
		srv.Close()
		return fail(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	announced := false
	w, err := worker.New(worker.Config{
		ControllerURL: url, Name: o.name, Token: nodeToken,
		ModuleCacheDir: filepath.Join(state, "modules"), LoadModules: nh.LoadModules, InitialSet: initial,
		Capabilities: pol.Ceiling(), Logger: log,
		OnConnected: func(h protocol.NodeHelloOK) {
			if announced {
				// A node reconnects after it switched sets (SIGHUP) or lost
				// its connection: say so, since calls to new methods
				// succeed from here on.
				digest, setDigest := "", ""
				if h.ModuleSet != nil {
					setDigest = h.ModuleSet.Digest
					digest = " (the controller pins module set " + setDigest + ")"
				}
				obs.notice(stderr, "lemon dev", fmt.Sprintf("node %q reconnected%s", o.name, digest), "node reconnected",
					"node", o.name, "digest", setDigest)
				return
			}
			announced = true
			fmt.Fprintf(stdout, "lemon dev: controller on %s, node %q (nodeId %s) serving %s\n", url, o.name, h.Auth.NodeID, cwd)
			fmt.Fprintf(stdout, "web console: http://%s/ui/ (log in with the operator token)\n", ln.Addr())
			if generated {
				fmt.Fprintf(stdout, "operator token (generated): %s\n", opToken)
			} else {
				fmt.Fprintf(stdout, "operator token: from %s\n", envControlPlaneToken)
				opToken = "$" + envControlPlaneToken
			}
			fmt.Fprintf(stdout, "try:\n  LEMON_OPERATOR_TOKEN=%s %s call --controller %s node.host.info '{\"nodeId\":\"%s\"}'\n",
				opToken, selfCommand(), url, h.Auth.NodeID)
		},
	})
	if err != nil {
		nh.Close()
		ln.Close()
		srv.Close()
		return fail(err)
	}

	maddr, err := obs.serveNodeMetrics(ctx, reg, w.Ready, log)
	if err != nil {
		ln.Close()
		srv.Close()
		return fail(err)
	}
	if maddr != nil {
		u := fmt.Sprintf("http://%s/metrics", maddr)
		obs.notice(stderr, "lemon dev", "node metrics on "+u, "metrics listening", "url", u)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go watchRepin(ctx, "lemon dev", hup, srv, *setDir, stderr, &sync.Mutex{})

	obs.notice(stderr, "lemon dev", fmt.Sprintf("starting, pid %d (the first start compiles the modules, later starts reuse the cache; kill -HUP %d re-reads --module-set)", os.Getpid(), os.Getpid()),
		"starting", "pid", os.Getpid())
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Serve(ctx, ln) }()
	workerDone := make(chan error, 1)
	go func() { workerDone <- w.Run(ctx) }()

	// Run until Ctrl-C or until either side fails; then stop the node
	// first (it cancels its in-flight work) and the controller after.
	var runErr error
	srvFinished, workerFinished := false, false
	select {
	case <-ctx.Done():
	case runErr = <-srvDone:
		srvFinished = true
	case runErr = <-workerDone:
		workerFinished = true
	}
	cancel()
	if !workerFinished {
		if err := <-workerDone; runErr == nil {
			runErr = err
		}
	}
	srv.Close()
	if !srvFinished {
		<-srvDone
	}
	nh.Close()
	if runErr != nil && !errors.Is(runErr, context.Canceled) && !errors.Is(runErr, net.ErrClosed) {
		return fail(runErr)
	}
	obs.notice(stderr, "lemon dev", "stopped", "stopped")
	return 0
}

// devVaultKey returns the dev node's vault key file, creating a random
// 32-byte key (hex, mode 0600) on first use.
func devVaultKey(state string) (string, error) {
	if err := os.MkdirAll(state, 0o700); err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	path := filepath.Join(state, "vault.key")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("vault key: %w", err)
	}
	return path, nil
}

// selfCommand is how the user ran this binary ("bin/lemon", "lemon",
// "./lemon"), for the lines lemon prints to copy; "lemon" when that is
// not known.
func selfCommand() string {
	if len(os.Args) > 0 && filepath.Base(os.Args[0]) == "lemon" {
		return os.Args[0]
	}
	return "lemon"
}

// devOperators reads the [[operators]] of the controller policy file path
// (validated as `lemon controller --policy` validates it); dev's own
// operator comes from LEMON_CONTROL_PLANE_OPERATOR_TOKEN, so that variable
// is not read again here.
func devOperators(path string, getenv func(string) string) ([]controller.OperatorCredential, error) {
	pol, err := policies.LoadController(path)
	if err != nil {
		return nil, fmt.Errorf("--operators: %w", err)
	}
	only := &policies.Controller{Operators: pol.Operators}
	cfg, err := controller.FromPolicy(only, func(k string) string {
		if k == envControlPlaneToken {
			return ""
		}
		return getenv(k)
	})
	if err != nil {
		return nil, fmt.Errorf("--operators: %w", err)
	}
	return cfg.Operators, nil
}
