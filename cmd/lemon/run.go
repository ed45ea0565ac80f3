package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"lemon/client"
	"lemon/protocol"
)

// `lemon run` runs one command on a node with node.process.run
// (docs/PROCESS.md) and behaves like the command run locally: stdin goes
// in, stdout and stderr come out decoded, and the exit code is the
// remote one.
func init() {
	registerCobra("run", newRunCommand)
}

const runLong = `Runs ARGV on NODE (a nodeId or a node name) with node.process.run: no
shell, argv[0] a bare name looked up in the node's fixed PATH or an
absolute path. Stdin, when it is not a terminal, is sent (at most 1 MiB;
-n sends none); the remote stdout and stderr are written to ours, decoded,
and lemon run exits with the remote exit code (128+N when signal N ended
the process).

Before sending, the processId is printed to stderr. A run happens at most
once per processId: if lemon run ends without a result (a lost
connection, Ctrl-C), 'lemon run NODE --get ID' prints what became of it
(the same receipt: output, state, exit code) and never runs it again.

Exit codes: the remote exit code for a completed run; 1 when lemon run
itself fails or the run did not complete (cancelled by --timeout or the
output cap, outcome unknown, still running; the reason is on stderr);
2 for a usage error; 130 on Ctrl-C (the node stops the run). The operator
token comes from LEMON_OPERATOR_TOKEN, else
LEMON_CONTROL_PLANE_OPERATOR_TOKEN; it needs operator.admin and the
node's exec capability.`

const runExample = `  lemon run build-box -- make -C /srv/app test
  git diff | lemon run build-box --cwd /srv/app -- git apply --check
  lemon run build-box --get run-5f2c0e8d41a7b9c3`

// runOptions are the parsed flags and arguments of `lemon run`.
type runOptions struct {
	node      string
	argv      []string
	get       string // --get ID: print that receipt instead of running
	id        string
	cwd       string
	timeout   time.Duration
	maxOutput int64
	noStdin   bool
	asJSON    bool
}

// Defaults of lemon run (docs/PROCESS.md gives the bounds).
const (
	runDefaultTimeout = time.Minute
	runDefaultCwd     = "."
)

func newRunCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &runOptions{}
	var session func() (operatorSession, error)
	c := &cobra.Command{
		Use:     "run NODE [flags] -- ARGV...\n  lemon run NODE --get ID",
		Short:   "run a command on a node: stdin in, stdout and stderr out, its exit code",
		Long:    runLong,
		Example: runExample,
		Args: func(c *cobra.Command, args []string) error {
			dash := c.ArgsLenAtDash()
			switch {
			case len(args) == 0:
				return errors.New("NODE is missing")
			case dash == 0:
				return errors.New("NODE comes before --")
			case dash > 1:
				return fmt.Errorf("one NODE before --, got %d words", dash)
			case o.get != "" && len(args) > 1:
				return errors.New("--get takes no ARGV")
			case o.get == "" && len(args) < 2:
				return errors.New("ARGV is missing: lemon run NODE -- COMMAND [ARG...]")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			o.node, o.argv = args[0], args[1:]
			if err := o.check(c.Flags()); err != nil {
				return usageError{msg: err.Error(), hint: "run 'lemon run --help'"}
			}
			sess, err := session()
			if err != nil {
				return usageError{msg: err.Error(), hint: "run 'lemon run --help'"}
			}
			stdinTTY := term.IsTerminal(int(os.Stdin.Fd()))
			return codeErr(interruptible(func(ctx context.Context) int {
				return runRun(ctx, sess, o, os.Stdin, stdinTTY, stdout, stderr)
			}))
		},
	}
	f := c.Flags()
	f.SortFlags = false
	f.DurationVar(&o.timeout, "timeout", runDefaultTimeout, "stop the run after this long, 1s to 30m (the node cancels it; exit 1)")
	f.StringVar(&o.id, "id", "", "processId to run under (default: a random run-...); 1-128 of A-Z a-z 0-9 _ : -")
	f.StringVar(&o.cwd, "cwd", runDefaultCwd, "working directory on the node, admitted by its file roots (\".\": the node's cwd)")
	f.Int64Var(&o.maxOutput, "max-output", protocol.ProcessMaxOutputMax, "stop the run once stdout and stderr together exceed this many bytes, 1 to 1048576")
	f.BoolVarP(&o.noStdin, "no-stdin", "n", false, "send no stdin even when it is not a terminal")
	f.StringVar(&o.get, "get", "", "print the receipt of the run with this processId again (never runs anything)")
	f.BoolVar(&o.asJSON, "json", false, "print the receipt as JSON (outputs base64) instead of the decoded output")
	session = operatorPFlags(f, os.Getenv)
	return c
}

// check validates the flags before anything is sent; each bound is the
// protocol's (docs/PROCESS.md, "Validation").
func (o *runOptions) check(f *pflag.FlagSet) error {
	if o.get != "" {
		for _, n := range []string{"timeout", "id", "cwd", "max-output", "no-stdin"} {
			if f.Changed(n) {
				return fmt.Errorf("--get takes no --%s", n)
			}
		}
		if protocol.ValidateProcessID(o.get) != nil {
			return errors.New("--get: a processId is 1-128 of A-Z a-z 0-9 _ : -")
		}
		return nil
	}
	ms := o.timeout.Milliseconds()
	if o.timeout%time.Millisecond != 0 || ms < protocol.ProcessTimeoutMinMs || ms > protocol.ProcessTimeoutMaxMs {
		return errors.New("--timeout must be a whole number of milliseconds from 1s to 30m")
	}
	if o.maxOutput < protocol.ProcessMaxOutputMin || o.maxOutput > protocol.ProcessMaxOutputMax {
		return fmt.Errorf("--max-output must be from %d to %d bytes", protocol.ProcessMaxOutputMin, protocol.ProcessMaxOutputMax)
	}
	if o.id == "" {
		b := make([]byte, 8)
		rand.Read(b)
		o.id = "run-" + hex.EncodeToString(b)
	}
	if protocol.ValidateProcessID(o.id) != nil {
		return errors.New("--id: a processId is 1-128 of A-Z a-z 0-9 _ : -")
	}
	if protocol.ValidateProcessCwd(o.cwd) != nil {
		return errors.New("--cwd must be a nonempty path of at most 4096 bytes without NUL or '..'")
	}
	if protocol.ValidateProcessArgv(o.argv) != nil {
		// Never echo argv: it may hold secrets.
		return errors.New("ARGV must be 1-128 UTF-8 strings without NUL, at most 131072 bytes together, argv[0] a bare name or an absolute path")
	}
	return nil
}

// operatorPFlags is operatorFlags for a cobra command: --controller and
// --scopes, resolved with the environment after parsing.
func operatorPFlags(f *pflag.FlagSet, getenv func(string) string) func() (operatorSession, error) {
	def := getenv(envController)
	if def == "" {
		def = defaultControllerURL
	}
	url := f.String("controller", def, "controller /ws URL ($"+envController+", else "+defaultControllerURL+")")
	scopes := f.String("scopes", "", "comma-separated operator scopes to request (default: all the token grants)")
	caFile := f.String("ca-file", getenv(client.EnvCAFile),
		"PEM CA certificate(s) to trust for wss:// besides the system roots ($"+client.EnvCAFile+"; 'lemon tls dev' writes one)")
	return func() (operatorSession, error) {
		s := operatorSession{url: *url, token: getenv(envOperatorToken), caFile: *caFile}
		if s.token == "" {
			s.token = getenv(envControlPlaneToken)
		}
		if s.token == "" {
			return s, fmt.Errorf("set %s (or %s) to an operator token", envOperatorToken, envControlPlaneToken)
		}
		for _, sc := range strings.Split(*scopes, ",") {
			if sc = strings.TrimSpace(sc); sc != "" {
				s.scopes = append(s.scopes, sc)
			}
		}
		return s, nil
	}
}

// runRun sends the run (or the get) and prints the receipt; it returns
// the exit code described in runLong. stdin is read only when it is not a
// terminal and -n is not given.
func runRun(ctx context.Context, sess operatorSession, o *runOptions, stdin io.Reader, stdinTTY bool, stdout, stderr io.Writer) int {
	var stdinB64 string
	if o.get == "" && !o.noStdin && !stdinTTY {
		b, err := io.ReadAll(io.LimitReader(stdin, protocol.ProcessStdinMaxBytes+1))
		if err != nil {
			fmt.Fprintln(stderr, "lemon run: cannot read stdin")
			return 1
		}
		if len(b) > protocol.ProcessStdinMaxBytes {
			fmt.Fprintf(stderr, "lemon run: stdin is over %d bytes; nothing was sent\n", protocol.ProcessStdinMaxBytes)
			return 2
		}
		stdinB64 = base64.StdEncoding.EncodeToString(b)
	}

	if sess.onEvent == nil {
		sess.onEvent = approvalNotice(stderr, "lemon run")
	}
	dialCtx, cancelDial := context.WithTimeout(ctx, time.Minute)
	conn, perr := sess.dial(dialCtx, "lemon-run")
	cancelDial()
	if perr != nil {
		printErrorObject(stderr, perr)
		return 1
	}
	defer conn.Close()
	lookCtx, cancelLook := context.WithTimeout(ctx, time.Minute)
	node, perr := conn.ResolveNode(lookCtx, o.node)
	cancelLook()
	if perr != nil {
		printErrorObject(stderr, perr)
		return 1
	}

	if o.get != "" {
		gctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		raw, perr := conn.Call(gctx, protocol.MethodProcessGet, protocol.ProcessIDParams{NodeID: node, ProcessID: o.get})
		if perr != nil {
			printErrorObject(stderr, perr)
			return 1
		}
		return printReceipt(raw, o.asJSON, true, o.node, 0, stdout, stderr)
	}

	params := protocol.ProcessRunParams{NodeID: node, ProcessID: o.id, Cwd: o.cwd, Argv: o.argv,
		StdinBase64: stdinB64, TimeoutMs: o.timeout.Milliseconds(), MaxOutputBytes: o.maxOutput}
	if n := runFrameBytes(params); n > conn.MaxPayload() {
		// The client would refuse it unsent; say why, and that nothing ran.
		fmt.Fprintf(stderr, "lemon run: the request is %d bytes, over the controller's maxPayload of %d (stdin is sent base64 in it); nothing was sent\n",
			n, conn.MaxPayload())
		return 1
	}
	// The receipt line goes out before the request, so whatever happens
	// next the caller can reconcile.
	fmt.Fprintf(stderr, "lemon run: processId %s on node %s (lemon run %s --get %s shows what became of it)\n",
		o.id, node, o.node, o.id)
	// The controller answers within the broker deadline; the margin
	// covers the relay and the connection.
	rctx, cancel := context.WithTimeout(ctx, protocol.ProcessRunDeadline(params.TimeoutMs)+
		protocol.ProcessCallerSlackMs*time.Millisecond+30*time.Second)
	defer cancel()
	raw, perr := conn.Call(rctx, protocol.MethodProcessRun, params)
	if perr != nil {
		printErrorObject(stderr, perr)
		switch {
		case ctx.Err() != nil:
			fmt.Fprintf(stderr, "lemon run: interrupted; the node stops the run. 'lemon run %s --get %s' shows what became of it\n", o.node, o.id)
		case nothingRan(perr):
			fmt.Fprintln(stderr, "lemon run: refused; nothing ran")
		default:
			fmt.Fprintf(stderr, "lemon run: the run may have started: 'lemon run %s --get %s' shows what became of it (do not run it again under a new id)\n", o.node, o.id)
		}
		return 1
	}
	return printReceipt(raw, o.asJSON, false, o.node, o.timeout, stdout, stderr)
}

// printReceipt writes a process receipt: its decoded stdout to stdout and
// stderr to stderr (or the receipt JSON with asJSON), a line on stderr for
// anything but a completed run (always, with summary, as --get does), and
// returns the exit code: the remote one for a completed run (128+N for
// signal N), else 1. name is the node as the operator typed it (a name or
// a nodeId), used in the hints; timeout is the run's --timeout (0 for
// --get): a run it sent that came back cancelled without an output
// overflow was stopped by that timeout.
func printReceipt(raw json.RawMessage, asJSON, summary bool, name string, timeout time.Duration, stdout, stderr io.Writer) int {
	var r protocol.ProcessReceipt
	if err := json.Unmarshal(raw, &r); err != nil || r.Validate() != nil {
		fmt.Fprintln(stderr, "lemon run: malformed receipt")
		return 1
	}
	if asJSON {
		fmt.Fprintf(stdout, "%s\n", raw)
	} else {
		for _, out := range []struct {
			b64 *string
			w   io.Writer
		}{{r.StdoutBase64, stdout}, {r.StderrBase64, stderr}} {
			if out.b64 == nil {
				continue
			}
			b, _ := base64.StdEncoding.DecodeString(*out.b64) // Validate checked it
			out.w.Write(b)
		}
	}
	code := 1
	if r.ExitCode != nil {
		code = *r.ExitCode
		if code < 0 {
			code = 128 - code
		}
		code &= 0xff
	}
	state := r.State
	if r.State == protocol.ProcessStateCancelled && timeout > 0 && !r.OutputTruncated {
		how := "stopped"
		if r.ExitCode != nil && *r.ExitCode == -9 {
			how = "killed"
		}
		state = fmt.Sprintf("timed out after %s and was %s", timeout, how)
	}
	if r.ExitCode != nil {
		state += fmt.Sprintf(", exit code %d", *r.ExitCode)
	}
	switch {
	case r.State == protocol.ProcessStateNotFound:
		fmt.Fprintf(stderr, "lemon run: no run %s on node %s\n", r.ProcessID, termSafe(r.NodeID))
		return 1
	case r.State == protocol.ProcessStateCompleted && !summary && !r.OutputTruncated:
		return code
	case r.State == protocol.ProcessStateCompleted:
	case r.State == protocol.ProcessStateRunning:
		state += "; 'lemon run " + termSafe(name) + " --get " + r.ProcessID + "' again later"
		code = 1
	default: // cancelled, outcome_unknown
		code = 1
	}
	if r.OutputTruncated {
		if r.StdoutBase64 == nil {
			state += "; output not available"
		} else {
			state += "; output truncated"
		}
	}
	fmt.Fprintf(stderr, "lemon run: %s on node %s: %s\n", r.ProcessID, termSafe(r.NodeID), state)
	return code
}

// nothingRan reports whether an error says for certain that the run did
// not start: its details say mutationMayHaveApplied:false, or it is a
// refusal made before anything is dispatched (FORBIDDEN, UNAUTHORIZED,
// INVALID_PARAMS, METHOD_NOT_FOUND: policy_denied, command_denied,
// command_not_allowed, a missing scope) and its details do not say
// mutationMayHaveApplied:true.
func nothingRan(perr *protocol.Error) bool {
	d := perr.Details
	if d != nil && d.MutationMayHaveApplied != nil {
		return !*d.MutationMayHaveApplied
	}
	switch perr.Code {
	case protocol.CodeForbidden, protocol.CodeUnauthorized, protocol.CodeInvalidParams, protocol.CodeMethodNotFound:
		return true
	}
	return false
}

// runFrameBytes is the size of the request frame carrying params, with
// the longest request id the client uses.
func runFrameBytes(params protocol.ProcessRunParams) int {
	b, err := json.Marshal(params)
	if err != nil {
		return 1 << 62
	}
	f, err := protocol.AppendRequest(nil, "r18446744073709551615", protocol.MethodProcessRun, b)
	if err != nil {
		return 1 << 62
	}
	return len(f)
}
