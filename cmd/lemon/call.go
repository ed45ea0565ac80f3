package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"lemon/client"
	"lemon/protocol"
	"lemon/version"
)

func init() {
	register("call", "call one controller method and print the payload as JSON", func(args []string) int {
		return interruptible(func(ctx context.Context) int {
			return runCall(ctx, args, os.Getenv, os.Stdin, os.Stdout, os.Stderr)
		})
	})
	setUsage("call", callUsage)
}

// Operator CLI defaults shared by call and nodes.
const (
	defaultControllerURL = "ws://127.0.0.1:7777/ws"
	envController        = "LEMON_CONTROLLER"
	envOperatorToken     = "LEMON_OPERATOR_TOKEN"
	envControlPlaneToken = "LEMON_CONTROL_PLANE_OPERATOR_TOKEN"
)

const callUsage = `usage: lemon call [--controller URL] [--timeout DURATION] [--scopes LIST]
                 [--execution-context JSON] METHOD [PARAMS_JSON | -]
       lemon call (--all | --nodes FILTER) [--concurrency N] [flags] METHOD [PARAMS_JSON | -]

Sends one request to the controller and prints the response payload as JSON
on stdout (exit 0). An error response is printed as its error object JSON on
stderr (exit 1); a usage error exits 2. PARAMS_JSON is a JSON object ("-"
reads it from stdin).

The operator token comes from LEMON_OPERATOR_TOKEN, else
LEMON_CONTROL_PLANE_OPERATOR_TOKEN. The controller defaults to
$LEMON_CONTROLLER, else ws://127.0.0.1:7777/ws.
--ca-file FILE (default $LEMON_CA_FILE) trusts a private CA for wss://
(lemon tls dev writes one).

--execution-context narrows the authority of the request (a JSON object
with any of principal, policy, workspace {root, mode}, capabilities and
limits; docs/POLICY.md, "Narrowing a request's context"); a wider one is
refused FORBIDDEN context_wider. When the operator's policy holds the
request for approval, the approval id is printed on stderr and the call
waits for an approver ("lemon approvals approve ID").

--all and --nodes run METHOD on many nodes at once (node.fanout,
docs/PROTOCOL.md "Fan-out"): PARAMS_JSON then holds no nodeId. --all is
every registered node (offline ones fail with node_offline); --nodes takes
comma-separated terms: name=PREFIX (names starting with PREFIX, any case),
online, offline. Each node's outcome is printed as one JSON line on stdout
as it arrives ({nodeId, name, ok, result | error, retrySafe,
mutationMayHaveApplied}), then a summary line {"summary":{fanoutId,
method, total, ok, failed, durationMs}}. The exit code is 1 when any node
failed or the fan-out was refused. --concurrency (1-1024, default 256)
bounds the node calls in flight.

examples:
  lemon call node.host.info '{"nodeId":"..."}'
  lemon call --all node.host.info
  lemon call --nodes name=web-,online node.host.info
  lemon call --execution-context '{"capabilities":[]}' node.fs.read '{"nodeId":"n1","path":"/etc/hostname"}'
`

// operatorSession holds what every operator subcommand needs.
type operatorSession struct {
	url    string
	token  string
	scopes []string
	caFile string // PEM CA bundle trusted for wss:// besides the system roots
	// execCtx, when set, narrows every request's execution context.
	execCtx json.RawMessage
	// onEvent, when set, receives the connection's events.
	onEvent func(protocol.Event)
}

// approvalNotice returns an event handler that prints the approval id of a
// held request on stderr (docs/POLICY.md, "Approvals"): the id and the
// method only, never params.
func approvalNotice(stderr io.Writer, prog string) func(protocol.Event) {
	return func(ev protocol.Event) {
		if ev.Event != protocol.EventApprovalRequested {
			return
		}
		var info protocol.ApprovalInfo
		if json.Unmarshal(ev.Payload, &info) != nil || !printableID(info.ApprovalID) {
			return
		}
		fmt.Fprintf(stderr, "%s: waiting for approval %s (an approver runs: lemon approvals approve %s)\n",
			prog, info.ApprovalID, info.ApprovalID)
	}
}

// printableID reports whether s is a short id of letters, digits and '-'.
func printableID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// operatorFlags adds --controller, --scopes and --ca-file to fs and returns a function
// that resolves them with the environment after parsing.
func operatorFlags(fs *flag.FlagSet, getenv func(string) string) func() (operatorSession, error) {
	def := getenv(envController)
	if def == "" {
		def = defaultControllerURL
	}
	url := fs.String("controller", def, "controller /ws URL (default $"+envController+" or "+defaultControllerURL+")")
	scopes := fs.String("scopes", "", "comma-separated operator scopes to request (default: all the token grants)")
	var caFile string
	caFileVar(fs, &caFile, getenv)
	return func() (operatorSession, error) {
		// Every operator command says which approval a held request waits on.
		s := operatorSession{url: *url, token: getenv(envOperatorToken), caFile: caFile,
			onEvent: approvalNotice(fs.Output(), fs.Name())}
		if s.token == "" {
			s.token = getenv(envControlPlaneToken)
		}
		if s.token == "" {
			return s, fmt.Errorf("set %s (or %s) to an operator token", envOperatorToken, envControlPlaneToken)
		}
		if *scopes != "" {
			for _, sc := range strings.Split(*scopes, ",") {
				if sc = strings.TrimSpace(sc); sc != "" {
					s.scopes = append(s.scopes, sc)
				}
			}
		}
		return s, nil
	}
}

// caFileVar adds --ca-file (default $LEMON_CA_FILE) to fs, stored in p: a
// PEM bundle trusted for wss:// besides the system roots (docs/DEPLOY.md,
// "TLS").
func caFileVar(fs *flag.FlagSet, p *string, getenv func(string) string) {
	fs.StringVar(p, "ca-file", getenv(client.EnvCAFile),
		"PEM CA certificate(s) to trust for wss:// besides the system roots (default $"+client.EnvCAFile+"; 'lemon tls dev' writes one)")
}

// dial connects an operator session. A failure is returned as a protocol
// error object (the controller's, or UNAVAILABLE with a safe reason).
func (s operatorSession) dial(ctx context.Context, clientID string) (*client.Conn, *protocol.Error) {
	conn, err := client.Dial(ctx, s.url, client.Options{Token: s.token, Scopes: s.scopes,
		ClientID: clientID, ClientVersion: version.Version, CAFile: s.caFile,
		ExecutionContext: s.execCtx, OnEvent: s.onEvent})
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return nil, pe
		}
		var de *client.DialError
		if errors.As(err, &de) {
			return nil, protocol.Errorf(protocol.CodeUnavailable, "%s", de.Error())
		}
		return nil, protocol.Errorf(protocol.CodeUnavailable, "cannot connect to the controller")
	}
	return conn, nil
}

// maxExecutionContextBytes bounds --execution-context (the controller's
// bound, authority.MaxContextBytes).
const maxExecutionContextBytes = 64 << 10

// maxParamsBytes bounds PARAMS_JSON read from stdin; the controller's
// maxPayload refuses anything bigger anyway.
const maxParamsBytes = 64 << 20

func runCall(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lemon call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, callUsage) }
	resolve := operatorFlags(fs, getenv)
	timeout := fs.Duration("timeout", 10*time.Minute, "give up waiting after this long (0: never)")
	execCtx := fs.String("execution-context", "", "a JSON object narrowing the request's execution context")
	all := fs.Bool("all", false, "run METHOD on every registered node (node.fanout)")
	nodesFilter := fs.String("nodes", "", "run METHOD on the nodes matching FILTER: name=PREFIX, online, offline (comma-separated)")
	concurrency := fs.Int("concurrency", 0, "with --all/--nodes: node calls in flight at once, 1-1024 (default 256)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var filter *protocol.NodeFilter
	if *all || *nodesFilter != "" {
		if *all && *nodesFilter != "" {
			fmt.Fprintln(stderr, "lemon call: --all and --nodes exclude each other")
			return 2
		}
		f, err := parseNodeFilter(*nodesFilter)
		if err != nil {
			fmt.Fprintf(stderr, "lemon call: --nodes: %v\n", err)
			return 2
		}
		filter = &f
		if *concurrency < 0 || *concurrency > protocol.MaxFanoutConcurrency {
			fmt.Fprintln(stderr, "lemon call: --concurrency must be 1 to 1024")
			return 2
		}
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fs.Usage()
		return 2
	}
	method := fs.Arg(0)
	var params json.RawMessage
	if fs.NArg() == 2 {
		raw := []byte(fs.Arg(1))
		if fs.Arg(1) == "-" {
			b, err := io.ReadAll(io.LimitReader(stdin, maxParamsBytes+1))
			if err != nil || len(b) > maxParamsBytes {
				fmt.Fprintln(stderr, "lemon call: cannot read PARAMS_JSON from stdin")
				return 2
			}
			raw = b
		}
		raw = bytes.TrimSpace(raw)
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			// Never echo the argument: it may hold file bytes or secrets.
			fmt.Fprintln(stderr, "lemon call: PARAMS_JSON must be a JSON object")
			return 2
		}
		params = raw
	}
	sess, err := resolve()
	if err != nil {
		fmt.Fprintf(stderr, "lemon call: %v\n", err)
		return 2
	}
	if *execCtx != "" {
		raw := bytes.TrimSpace([]byte(*execCtx))
		var obj map[string]json.RawMessage
		if len(raw) > maxExecutionContextBytes || json.Unmarshal(raw, &obj) != nil || obj == nil {
			fmt.Fprintln(stderr, "lemon call: --execution-context must be a JSON object of at most 65536 bytes")
			return 2
		}
		sess.execCtx = raw
	}
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	if filter != nil {
		return runFanout(ctx, sess, method, params, *filter, *concurrency, stdout, stderr)
	}
	conn, perr := sess.dial(ctx, "lemon-call")
	if perr != nil {
		printErrorObject(stderr, perr)
		return 1
	}
	defer conn.Close()
	if params, perr = resolveParamsNode(ctx, conn, params); perr != nil {
		printErrorObject(stderr, perr)
		return 1
	}
	payload, perr := conn.Call(ctx, method, params)
	if perr != nil {
		printErrorObject(stderr, perr)
		return 1
	}
	var out bytes.Buffer
	if json.Indent(&out, payload, "", "  ") != nil {
		out.Reset()
		out.Write(payload)
	}
	out.WriteByte('\n')
	stdout.Write(out.Bytes())
	return 0
}

// printErrorObject writes {"code","message","details"} as one JSON line.
func printErrorObject(w io.Writer, perr *protocol.Error) {
	b, err := json.Marshal(perr)
	if err != nil {
		b = []byte(`{"code":"INTERNAL_ERROR","message":"error not encodable"}`)
	}
	w.Write(append(b, '\n'))
}

// resolveParamsNode replaces a node name in params.nodeId by that node's
// nodeId (client.Conn.ResolveNode), as every command taking a node does;
// params without a string nodeId are returned unchanged.
func resolveParamsNode(ctx context.Context, conn *client.Conn, params json.RawMessage) (json.RawMessage, *protocol.Error) {
	var obj map[string]json.RawMessage
	if params == nil || json.Unmarshal(params, &obj) != nil {
		return params, nil
	}
	var name string
	if raw, ok := obj["nodeId"]; !ok || json.Unmarshal(raw, &name) != nil {
		return params, nil
	}
	id, perr := conn.ResolveNode(ctx, name)
	if perr != nil || id == name {
		return params, perr
	}
	obj["nodeId"], _ = json.Marshal(id)
	b, err := json.Marshal(obj)
	if err != nil {
		return params, nil
	}
	return b, nil
}
