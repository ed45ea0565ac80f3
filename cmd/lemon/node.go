package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"lemon/client"
	"lemon/host/moduleset/defaultset"
	"lemon/hostcalls"
	"lemon/protocol"
	"lemon/worker"
)

func init() {
	register("node", "run an execution node: lemon node join ...", runNode)
	setUsage("node", nodeUsage)
}

const nodeUsage = `usage: lemon node join --controller URL[,URL...] [--name NAME] [--pair [--repair --node-id ID]]
                      [--cwd DIR] [--allowed-root DIR]... [--capabilities LIST]
                      [--policy worker.toml] [--state DIR] [--allow-insecure-controller]
                      [--log-format text|json] [--log-level LEVEL] [--audit-file FILE]
                      [--metrics-listen ADDR]

Joins a controller as a named execution node and serves its methods until
interrupted.

Credentials (prefer the environment to flags, which enter shell history):
  LEMON_NODE_TOKEN           interim node token from the controller policy
  LEMON_NODE_OPERATOR_TOKEN  operator token, used only by --pair
  LEMON_NODE_CAPABILITIES    comma-separated capabilities: narrows the ceiling
                             like --capabilities
Layers only narrow: the node's policy is the --policy file ∩ the flags ∩
LEMON_NODE_CAPABILITIES. An --allowed-root outside the file's allowed_roots,
a capability outside its capabilities, or a --cwd outside the effective
roots is an error. Without a file the roots are home plus each --allowed-root.
Without LEMON_NODE_TOKEN the session stored by a previous --pair under
~/.lemon/nodes/execution/ is used (bound to the exact controller URL).
--name finds it by the node's controller-side name or by the name it was
first joined with, so an operator rename does not orphan it.

  --pair                     enrol (or re-pair after expiry, keeping the node ID).
                             With an operator.admin token a new node is paired at
                             once; with an operator.pairing token it prints a code
                             that an operator.approvals or operator.admin holder
                             approves with 'lemon nodes approve CODE'. A re-pair
                             uses and rotates the stored recovery credential.
  --pair --repair --node-id ID
                             re-pair a legacy identity that has no recovery
                             credential; always waits for an approver (an admin
                             when the node still holds a live session); refused
                             for a node that has a recovery credential
  --allow-insecure-controller  allow ws:// to a non-loopback controller
                             (or LEMON_NODE_ALLOW_INSECURE_CONTROLLER=true)
  --log-format F             stderr log format: text (default) or json
  --log-level L              debug, info (default), warn or error
  --audit-file FILE          one JSON line per host call, with the invokeId and principal
                             (docs/OPERATIONS.md); rotated at 100 MiB keeping 10; - for stdout
  --metrics-listen ADDR      serve /metrics, /healthz and /readyz on ADDR (e.g. 127.0.0.1:9464)
  --ca-file FILE             PEM CA certificate(s) trusted for wss:// besides the
                             system roots, for the node and --pair (default
                             $LEMON_CA_FILE; 'lemon tls dev' writes one)
`

const (
	envNodeToken         = "LEMON_NODE_TOKEN"
	envNodeOperatorToken = "LEMON_NODE_OPERATOR_TOKEN"
	envAllowInsecure     = "LEMON_NODE_ALLOW_INSECURE_CONTROLLER"
	// envNodeCapabilities narrows the capability ceiling like
	// --capabilities (docs/POLICY.md, "Node layers").
	envNodeCapabilities = "LEMON_NODE_CAPABILITIES"
)

func runNode(args []string) int {
	if len(args) < 1 || args[0] != "join" {
		fmt.Fprint(os.Stderr, nodeUsage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runNodeJoin(ctx, args[1:], os.Getenv, os.Stderr)
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// nodeOptions are the parsed flags of node join.
type nodeOptions struct {
	name, controller, cwd, policy, state string
	// failover are the further --controller URLs (docs/CLUSTER.md, "Failover").
	failover             []string
	roots                stringList
	capabilities         string
	insecure             bool
	pair, repair         bool
	nodeID               string
	token, operatorToken string
	maxPayload           int
	obs                  *obsFlags
	caFile               string // --ca-file, default $LEMON_CA_FILE
}

func parseNodeFlags(args []string, getenv func(string) string, stderr io.Writer) (*nodeOptions, int) {
	o := &nodeOptions{}
	fs := flag.NewFlagSet("lemon node join", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, nodeUsage) }
	fs.StringVar(&o.name, "name", "", "node name (trimmed; unique per controller)")
	fs.StringVar(&o.controller, "controller", "", "controller /ws URL (wss://, or ws:// to loopback); URL1,URL2,... for a cluster (failover, first preferred)")
	fs.StringVar(&o.cwd, "cwd", "", "default working directory (default: the current directory)")
	fs.Var(&o.roots, "allowed-root", "allowed file root: added to home without --policy; with --policy it must lie inside the file's allowed_roots and narrows them (repeatable)")
	fs.StringVar(&o.capabilities, "capabilities", "", "comma-separated capability ceiling: all, or names such as "+strings.Join(hostcalls.AllCapabilities, ",")+" and any a module declares (e.g. kv)")
	fs.StringVar(&o.policy, "policy", "", "worker policy TOML file")
	fs.StringVar(&o.state, "state", "", "state directory (default: policy state_dir, else ~/.lemon/nodes/state/NAME, NAME as first joined)")
	fs.BoolVar(&o.insecure, "allow-insecure-controller", false, "allow plaintext ws:// to a non-loopback controller")
	fs.BoolVar(&o.pair, "pair", false, "pair with the controller (operator token from "+envNodeOperatorToken+")")
	fs.BoolVar(&o.repair, "repair", false, "with --pair and --node-id: re-pair an identity without a recovery credential")
	fs.StringVar(&o.nodeID, "node-id", "", "durable node ID (with --repair, or to pick a stored identity)")
	fs.StringVar(&o.token, "token", "", "node token (prefer "+envNodeToken+")")
	fs.StringVar(&o.operatorToken, "operator-token", "", "operator token for --pair (prefer "+envNodeOperatorToken+")")
	fs.IntVar(&o.maxPayload, "max-payload", protocol.DefaultMaxPayload, "largest frame this node accepts and sends, in bytes")
	o.obs = addObsFlags(fs, "node", "info")
	caFileVar(fs, &o.caFile, getenv)
	if err := fs.Parse(args); err != nil {
		return nil, 2
	}
	if err := o.obs.check(); err != nil {
		fmt.Fprintf(stderr, "lemon node join: %v\n", err)
		return nil, 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "lemon node join: unexpected arguments")
		return nil, 2
	}
	if o.controller == "" {
		fmt.Fprintln(stderr, "lemon node join: --controller is required")
		return nil, 2
	}
	// --controller URL1,URL2,...: the first is preferred and pairs; the
	// others are failover controllers of the same cluster.
	if urls := strings.Split(o.controller, ","); len(urls) > 1 {
		if len(urls) > worker.MaxControllerURLs {
			fmt.Fprintf(stderr, "lemon node join: at most %d controller URLs\n", worker.MaxControllerURLs)
			return nil, 2
		}
		for i := range urls {
			urls[i] = strings.TrimSpace(urls[i])
		}
		o.controller, o.failover = urls[0], urls[1:]
	}
	if o.repair && (!o.pair || o.nodeID == "") {
		fmt.Fprintln(stderr, "lemon node join: --repair needs --pair and --node-id")
		return nil, 2
	}
	if o.maxPayload < 64<<10 || o.maxPayload > 64<<20 {
		fmt.Fprintln(stderr, "lemon node join: --max-payload must be between 65536 and 67108864")
		return nil, 2
	}
	if o.token == "" {
		o.token = getenv(envNodeToken)
	}
	if o.operatorToken == "" {
		o.operatorToken = getenv(envNodeOperatorToken)
	}
	if !o.insecure {
		if v, err := strconv.ParseBool(getenv(envAllowInsecure)); err == nil && v {
			o.insecure = true
		}
	}
	return o, 0
}

// existingDir makes p absolute and checks it is a directory. Errors name
// the problem, not the path's contents.
func existingDir(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", errors.New("not a usable path")
	}
	fi, err := os.Stat(abs)
	if err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s is not an existing directory", abs)
	}
	return abs, nil
}

var unsafeNameChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// defaultStateDir is ~/.lemon/nodes/state/<name>.
func defaultStateDir(name string) (string, error) {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", errors.New("no home directory; pass --state")
	}
	return filepath.Join(home, ".lemon", "nodes", "state", sanitizeName(name)), nil
}

// sanitizeName turns a node name into one safe path component.
func sanitizeName(name string) string {
	n := strings.Trim(unsafeNameChars.ReplaceAllString(strings.TrimSpace(name), "_"), "._")
	if n == "" {
		n = "default"
	}
	return n
}

// joinIdentity is what the worker connects with.
type joinIdentity struct {
	token, nodeID string
	// name is the node's controller-side name as last known (advertised).
	name string
	// localName names the default state directory. For a paired identity
	// it is the name the identity was first joined with, so an operator
	// rename (learned at the next re-pairing) does not move the node's
	// store and vault to another directory.
	localName string
}

// nodeIdentity resolves the credentials the worker connects with: an
// interim node token, a fresh pairing, or a stored session.
func nodeIdentity(ctx context.Context, o *nodeOptions, methods map[string]int, log *slog.Logger, stderr io.Writer) (joinIdentity, error) {
	if o.pair {
		store, err := worker.DefaultTokenStore()
		if err != nil {
			return joinIdentity{}, err
		}
		cfg := worker.PairConfig{
			ControllerURL: o.controller, AllowInsecureController: o.insecure,
			OperatorToken: o.operatorToken, Name: o.name, Methods: methods, Store: store,
			Repair: o.repair, NodeID: o.nodeID, Logger: log, CAFile: o.caFile,
			OnCode: func(code string, exp time.Time) {
				fmt.Fprintf(stderr, "pairing code: %s (valid until %s)\napprove it with: lemon nodes --controller %s approve %s\n",
					code, exp.Local().Format(time.TimeOnly), o.controller, code)
			},
		}
		if !o.repair {
			existing, lerr := lookupRecord(store, o)
			switch {
			case lerr == nil:
				cfg.Existing = existing
			case errors.Is(lerr, worker.ErrNoRecord):
				if o.name == "" {
					return joinIdentity{}, errors.New("--name is required to pair a new node")
				}
			default:
				return joinIdentity{}, lerr
			}
		}
		rec, err := worker.Pair(ctx, cfg)
		if err != nil {
			return joinIdentity{}, err
		}
		fmt.Fprintf(stderr, "paired as %s (node ID %s); session stored\n", rec.Name, rec.NodeID)
		return joinIdentity{token: rec.SessionToken, nodeID: rec.NodeID, name: rec.Name, localName: rec.LocalName()}, nil
	}
	if o.token != "" {
		if o.name == "" {
			return joinIdentity{}, errors.New("--name is required with a node token")
		}
		return joinIdentity{token: o.token, nodeID: o.nodeID, name: o.name, localName: o.name}, nil
	}
	store, err := worker.DefaultTokenStore()
	if err != nil {
		return joinIdentity{}, err
	}
	rec, err := lookupRecord(store, o)
	if errors.Is(err, worker.ErrNoRecord) {
		return joinIdentity{}, fmt.Errorf("no node token: set %s, or pair this node with --pair", envNodeToken)
	}
	if err != nil {
		return joinIdentity{}, err
	}
	if !rec.SessionValid(time.Now()) {
		return joinIdentity{}, errors.New("the stored session has expired: re-run with --pair (the node keeps its ID and name)")
	}
	return joinIdentity{token: rec.SessionToken, nodeID: rec.NodeID, name: rec.Name, localName: rec.LocalName()}, nil
}

// lookupRecord finds the stored identity a join means: by --node-id, else
// by --name, which matches the node's controller-side name or the name it
// was first joined with (worker.TokenStore.FindByName). Both require the
// exact controller URL.
func lookupRecord(store worker.TokenStore, o *nodeOptions) (*worker.NodeRecord, error) {
	if o.nodeID != "" {
		return store.Load(o.nodeID, o.controller)
	}
	if o.name == "" {
		return nil, worker.ErrNoRecord
	}
	return store.FindByName(o.name, o.controller)
}

func runNodeJoin(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	if nodeUnsupported("lemon node join", stderr) {
		return 1
	}
	o, code := parseNodeFlags(args, getenv, stderr)
	if o == nil {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "lemon node join: %v\n", err)
		return 1
	}
	if err := worker.CheckControllerURL(o.controller, o.insecure); err != nil {
		return fail(err)
	}
	if err := checkCAFile(o.controller, o.caFile); err != nil {
		return fail(err) // before the modules load: the file is the operator's to fix
	}
	log := o.obs.logger(stderr, o.obs.logLevel)
	pol, cwd, roots, err := nodeLayers(o, getenv, false)
	if err != nil {
		return fail(err)
	}

	var initial *worker.ModuleSet
	if m, mods, err := defaultset.Load(); err == nil {
		initial, _ = worker.NewModuleSet(m, mods)
	}
	methods := map[string]int{}
	if initial != nil {
		for _, mod := range initial.Manifest.Modules {
			for _, meth := range mod.Methods {
				methods[meth.Name] = meth.Version
			}
		}
	}
	id, err := nodeIdentity(ctx, o, methods, log, stderr)
	if err != nil {
		if ctx.Err() != nil {
			return 130
		}
		return fail(err)
	}

	state := o.state
	if state == "" {
		state = pol.StateDir
	}
	if state == "" {
		if state, err = defaultStateDir(id.localName); err != nil {
			return fail(err)
		}
	}
	sink, err := o.obs.openAudit()
	if err != nil {
		return fail(err)
	}
	defer sink.Close()
	reg := worker.NewMetricsRegistry()
	nh, err := worker.NewNodeHost(worker.HostOptions{Policy: pol, DefaultCwd: cwd, Roots: roots,
		StateDir: state, MaxPayload: o.maxPayload, Logger: log, Registry: reg, Audit: sink})
	if err != nil {
		return fail(err)
	}
	defer nh.Close()
	w, err := worker.New(worker.Config{
		ControllerURL: o.controller, FailoverURLs: o.failover, AllowInsecureController: o.insecure,
		Name: id.name, NodeID: id.nodeID, Token: id.token,
		ModuleCacheDir: filepath.Join(state, "modules"), LoadModules: nh.LoadModules, InitialSet: initial,
		Capabilities: pol.Ceiling(), MaxPayload: o.maxPayload, Logger: log,
		CAFile: o.caFile,
	})
	if err != nil {
		return fail(err)
	}
	addr, err := o.obs.serveNodeMetrics(ctx, reg, w.Ready, log)
	if err != nil {
		return fail(err)
	}
	if addr != nil {
		u := fmt.Sprintf("http://%s/metrics", addr)
		o.obs.notice(stderr, "lemon node join", "metrics on "+u, "metrics listening", "url", u)
	}
	log.Info("node starting", "name", id.name, "families", strings.Join(nh.Families(), ","), "capabilities", strings.Join(pol.Ceiling(), ","))
	if err := w.Run(ctx); err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			switch pe.DomainCode() {
			case protocol.DomainSessionExpired:
				return fail(errors.New("the session has expired: re-run with --pair (the node keeps its ID and name)"))
			case protocol.DomainSessionRevoked:
				return fail(errors.New("this session was revoked by a newer pairing of the same node"))
			case protocol.DomainNodeIdentityMismatch:
				return fail(errors.New("the token authenticates as a different node; refusing it"))
			}
			return fail(fmt.Errorf("the controller refused this node (%s)", pe.Code))
		}
		if errors.Is(err, client.ErrCAFile) {
			// The CA file became unusable after the start: the controller
			// refused nothing, so say only what is wrong with the file.
			return fail(caFileCause(err))
		}
		return fail(err)
	}
	return 0
}

// checkCAFile loads caFile (--ca-file, else $LEMON_CA_FILE) when the
// controller URL is wss:// and caFile is set, so that an unusable file
// stops lemon node join at once, before the modules load; a ws:// URL
// never reads it (docs/DEPLOY.md, "TLS"). The error wraps client.ErrCAFile.
func checkCAFile(controllerURL, caFile string) error {
	if caFile == "" || !strings.HasPrefix(strings.ToLower(controllerURL), "wss://") {
		return nil
	}
	_, err := client.LoadCAFile(caFile)
	return err
}

// caFileCause drops worker.ErrFatal ("controller refused this node") from
// err, a fatal CA-file error of worker.Run: it returns the error ErrFatal
// was joined with, or err.
func caFileCause(err error) error {
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range u.Unwrap() {
			if e != worker.ErrFatal && errors.Is(e, client.ErrCAFile) {
				return e
			}
		}
	}
	return err
}
