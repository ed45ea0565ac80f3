package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"
)

// Process family (spec "Native processes", "Receipt meaning and
// reconciliation", "Cancellation races"): method names, limits, receipt
// states, parameter types and the strict validation shared by the
// controller (before dispatch) and the node (again, in the guest module and
// in the spawn host call).

// Method names of the process family.
const (
	MethodProcessRun    = "node.process.run"
	MethodProcessGet    = "node.process.get"
	MethodProcessCancel = "node.process.cancel"
)

// Limits of node.process.run, inclusive.
const (
	ProcessIDMaxLen        = 128     // processId length in bytes (ASCII)
	ProcessArgvMaxCount    = 128     // argv strings
	ProcessArgvMaxBytes    = 131072  // bytes of one argv string and of all of them together
	ProcessCwdMaxBytes     = 4096    // cwd bytes
	ProcessStdinMaxBytes   = 1048576 // decoded stdin bytes
	ProcessTimeoutMinMs    = 1000    // timeoutMs lower bound, ms
	ProcessTimeoutMaxMs    = 1800000 // timeoutMs upper bound, ms (30 minutes)
	ProcessMaxOutputMin    = 1       // maxOutputBytes lower bound, bytes
	ProcessMaxOutputMax    = 1048576 // maxOutputBytes upper bound, bytes (stdout+stderr combined)
	ProcessRunDeadlineSlop = 5000    // ms the broker adds to timeoutMs
	ProcessCallerSlackMs   = 1000    // ms the caller's await adds to the broker deadline
	ProcessMaxActive       = 16      // runs in progress per node
	ProcessMaxRetained     = 1000    // retained processIds per node, tombstones included
	ProcessOutputCacheMax  = 16      // terminal receipts whose output is cached
	ProcessOutputCacheTTL  = 24 * time.Hour
)

// Receipt states. ProcessStateNotFound is returned by node.process.get only.
const (
	ProcessStateRunning        = "running"
	ProcessStateCompleted      = "completed"
	ProcessStateCancelled      = "cancelled"
	ProcessStateOutcomeUnknown = "outcome_unknown"
	ProcessStateNotFound       = "not_found"
)

// Domain codes of the process family (error.details.code), besides
// DomainProcessReceiptLimit and DomainPathNotAllowed.
const (
	// DomainProcessIDConflict: run with a processId already bound to a
	// different intent (argv, cwd, stdin, timeoutMs or maxOutputBytes).
	DomainProcessIDConflict = "process_id_conflict"
	// DomainProcessNotOwner: cancel of an active run from a session
	// generation other than the one that started it.
	DomainProcessNotOwner = "process_not_owner"
	// DomainCommandNotAllowed: argv[0] refused by the worker policy's
	// allowed_commands / blocked_commands.
	DomainCommandNotAllowed = "command_not_allowed"
	// DomainExecutableNotFound: argv[0] does not name an executable file.
	DomainExecutableNotFound = "executable_not_found"
	// DomainArgumentListTooLong: the OS refused argv with E2BIG.
	DomainArgumentListTooLong = "argument_list_too_long"
	// DomainExecFormat: the file is not an executable the OS can run.
	DomainExecFormat = "exec_format_error"
	// DomainProcessSignalFailed: the first attempt to stop the process
	// group failed; the run's outcome is unknown.
	DomainProcessSignalFailed = "process_signal_failed"
	// DomainProcessStoreUnavailable: the durable receipt store failed; no
	// state can be attested.
	DomainProcessStoreUnavailable = "process_store_unavailable"
)

// ProcessRunParams are the params of node.process.run. Every field is
// required (spec "Native processes").
type ProcessRunParams struct {
	NodeID    string   `json:"nodeId"`
	ProcessID string   `json:"processId"`
	Cwd       string   `json:"cwd"`
	Argv      []string `json:"argv"`
	// StdinBase64 is standard base64 of at most ProcessStdinMaxBytes
	// decoded bytes; "" closes stdin at once.
	StdinBase64    string `json:"stdinBase64"`
	TimeoutMs      int64  `json:"timeoutMs"`
	MaxOutputBytes int64  `json:"maxOutputBytes"`
}

// ProcessIDParams are the params of node.process.get and node.process.cancel.
type ProcessIDParams struct {
	NodeID    string `json:"nodeId"`
	ProcessID string `json:"processId"`
}

// ProcessReceipt is the seven-field result of every process method. It
// always marshals all seven keys: ExitCode is null unless an exit was
// observed; StdoutBase64/StderrBase64 are null when the bytes are not
// known (then OutputTruncated is true) and "" only for known zero bytes.
type ProcessReceipt struct {
	ProcessID       string  `json:"processId"`
	NodeID          string  `json:"nodeId"`
	State           string  `json:"state"`
	ExitCode        *int    `json:"exitCode"`
	StdoutBase64    *string `json:"stdoutBase64"`
	StderrBase64    *string `json:"stderrBase64"`
	OutputTruncated bool    `json:"outputTruncated"`
}

var processRunFields = []string{"nodeId", "processId", "cwd", "argv", "stdinBase64", "timeoutMs", "maxOutputBytes"}
var processIDFields = []string{"nodeId", "processId"}

// ParseProcessRun strictly decodes and validates node.process.run params
// as the controller receives them (stdinBase64 present as a string). The
// returned params are valid; stdin is checked but not kept decoded.
func ParseProcessRun(raw json.RawMessage) (ProcessRunParams, *Error) {
	return parseProcessRun(raw, false)
}

// ParseProcessRunNoStdin validates node.process.run params from which the
// host has already removed stdinBase64 (decoded into an input blob, see
// docs/ABI.md "inputBlobs"). A stdinBase64 key is then an error. The
// caller checks the blob's size with ValidateProcessStdinSize.
func ParseProcessRunNoStdin(raw json.RawMessage) (ProcessRunParams, *Error) {
	return parseProcessRun(raw, true)
}

func parseProcessRun(raw json.RawMessage, stdinRemoved bool) (ProcessRunParams, *Error) {
	var p ProcessRunParams
	want := processRunFields
	if stdinRemoved {
		want = want[:4:4]
		want = append(want, "timeoutMs", "maxOutputBytes")
	}
	fields, perr := exactFields(raw, want)
	if perr != nil {
		return p, perr
	}
	if err := decodeNodeAndProcessID(fields, &p.NodeID, &p.ProcessID); err != nil {
		return p, err
	}
	if err := decodeString(fields, "cwd", &p.Cwd); err != nil {
		return p, err
	}
	if err := ValidateProcessCwd(p.Cwd); err != nil {
		return p, err
	}
	var argv []*string
	if err := json.Unmarshal(fields["argv"], &argv); err != nil || argv == nil {
		return p, InvalidParams("argv", "argv must be an array of strings")
	}
	p.Argv = make([]string, len(argv))
	for i, a := range argv {
		if a == nil {
			return p, InvalidParams("argv", "argv must be an array of strings")
		}
		p.Argv[i] = *a
	}
	if err := ValidateProcessArgv(p.Argv); err != nil {
		return p, err
	}
	if !stdinRemoved {
		if err := decodeString(fields, "stdinBase64", &p.StdinBase64); err != nil {
			return p, err
		}
		if err := ValidateProcessStdinBase64(p.StdinBase64); err != nil {
			return p, err
		}
	}
	if err := decodeInt(fields, "timeoutMs", &p.TimeoutMs); err != nil {
		return p, err
	}
	if p.TimeoutMs < ProcessTimeoutMinMs || p.TimeoutMs > ProcessTimeoutMaxMs {
		return p, InvalidParams("timeoutMs", "timeoutMs must be an integer from 1000 to 1800000")
	}
	if err := decodeInt(fields, "maxOutputBytes", &p.MaxOutputBytes); err != nil {
		return p, err
	}
	if p.MaxOutputBytes < ProcessMaxOutputMin || p.MaxOutputBytes > ProcessMaxOutputMax {
		return p, InvalidParams("maxOutputBytes", "maxOutputBytes must be an integer from 1 to 1048576")
	}
	return p, nil
}

// ParseProcessID strictly decodes and validates the params of
// node.process.get and node.process.cancel: exactly nodeId and processId.
func ParseProcessID(raw json.RawMessage) (ProcessIDParams, *Error) {
	var p ProcessIDParams
	fields, perr := exactFields(raw, processIDFields)
	if perr != nil {
		return p, perr
	}
	if err := decodeNodeAndProcessID(fields, &p.NodeID, &p.ProcessID); err != nil {
		return p, err
	}
	return p, nil
}

// ValidateProcessID checks a processId: 1–128 ASCII letters, digits, '_',
// ':' or '-'.
func ValidateProcessID(id string) *Error {
	if len(id) < 1 || len(id) > ProcessIDMaxLen {
		return InvalidParams("processId", "processId must be 1 to 128 characters")
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == ':' || c == '-'
		if !ok {
			return InvalidParams("processId", "processId may hold only ASCII letters, digits, '_', ':' and '-'")
		}
	}
	return nil
}

// ValidateProcessArgv checks argv: 1–128 valid UTF-8 strings without NUL,
// each and all together at most 131,072 bytes; argv[0] nonempty and either
// a bare name (looked up in the node's fixed PATH) or an absolute path.
func ValidateProcessArgv(argv []string) *Error {
	if len(argv) < 1 || len(argv) > ProcessArgvMaxCount {
		return InvalidParams("argv", "argv must hold 1 to 128 strings")
	}
	total := 0
	for _, a := range argv {
		if len(a) > ProcessArgvMaxBytes {
			return InvalidParams("argv", "an argv string exceeds 131072 bytes")
		}
		total += len(a)
		if !utf8.ValidString(a) {
			return InvalidParams("argv", "argv strings must be valid UTF-8")
		}
		if strings.IndexByte(a, 0) >= 0 {
			return InvalidParams("argv", "argv strings must not contain NUL")
		}
	}
	if total > ProcessArgvMaxBytes {
		return InvalidParams("argv", "argv exceeds 131072 bytes in total")
	}
	a0 := argv[0]
	if a0 == "" {
		return InvalidParams("argv", "argv[0] must name an executable")
	}
	if strings.Contains(a0, "/") && !strings.HasPrefix(a0, "/") {
		return InvalidParams("argv", "argv[0] must be a command name or an absolute path")
	}
	if strings.HasSuffix(a0, "/") {
		return InvalidParams("argv", "argv[0] must name a file")
	}
	return nil
}

// ValidateProcessCwd checks cwd: nonempty UTF-8, at most 4096 bytes, no NUL
// and no ".." component. Admission under the allowed roots is the node's
// job.
func ValidateProcessCwd(cwd string) *Error {
	if cwd == "" {
		return InvalidParams("cwd", "cwd must not be empty")
	}
	if len(cwd) > ProcessCwdMaxBytes {
		return InvalidParams("cwd", "cwd exceeds 4096 bytes")
	}
	if !utf8.ValidString(cwd) {
		return InvalidParams("cwd", "cwd must be valid UTF-8")
	}
	if strings.IndexByte(cwd, 0) >= 0 {
		return InvalidParams("cwd", "cwd must not contain NUL")
	}
	for _, c := range strings.Split(cwd, "/") {
		if c == ".." {
			return InvalidParams("cwd", "cwd must not contain .. components")
		}
	}
	return nil
}

// ValidateProcessStdinBase64 checks stdinBase64: strict standard base64
// (padded, no whitespace) of at most 1,048,576 decoded bytes.
func ValidateProcessStdinBase64(s string) *Error {
	if base64.StdEncoding.DecodedLen(len(s)) > ProcessStdinMaxBytes+2 {
		return InvalidParams("stdinBase64", "stdin exceeds 1048576 decoded bytes")
	}
	n, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || strings.ContainsAny(s, "\r\n") {
		return InvalidParams("stdinBase64", "stdinBase64 must be standard base64")
	}
	return ValidateProcessStdinSize(len(n))
}

// ValidateProcessStdinSize checks the decoded stdin size in bytes.
func ValidateProcessStdinSize(n int) *Error {
	if n > ProcessStdinMaxBytes {
		return InvalidParams("stdinBase64", "stdin exceeds 1048576 decoded bytes")
	}
	return nil
}

// ProcessReceiptReserve is the room, in bytes, a receipt keeps beside
// its two base64 output strings: its other fields (a processId of at most
// ProcessIDMaxLen bytes, the nodeId, state, exitCode, outputTruncated)
// and RelayReserve.
const ProcessReceiptReserve = 4096

// ProcessOutputBudget returns the largest combined stdout+stderr byte count
// whose receipt still fits a result payload of maxResult bytes
// (InvokeRequest.MaxResultBytes) once both streams are base64-encoded,
// keeping ProcessReceiptReserve for the rest. maxResult <= 0 means
// DefaultMaxPayload. The result is at least 1. The node caps captured
// output at min(maxOutputBytes, this budget).
func ProcessOutputBudget(maxResult int) int {
	if maxResult <= 0 {
		maxResult = DefaultMaxPayload
	}
	return max(Base64Budget(maxResult-ProcessReceiptReserve, 2), 1)
}

// ProcessRunDeadline is the broker deadline of a run: timeoutMs + 5000 ms.
func ProcessRunDeadline(timeoutMs int64) time.Duration {
	return time.Duration(timeoutMs+ProcessRunDeadlineSlop) * time.Millisecond
}

// Validate checks the receipt's invariants (spec "Receipt meaning and
// reconciliation"): a known state; a completed receipt has an exit code;
// running, outcome_unknown and not_found have null exit and outputs;
// a null output implies outputTruncated; outputs are valid base64.
func (r ProcessReceipt) Validate() *Error {
	bad := func(msg string) *Error { return Errorf(CodeInternal, "invalid process receipt: %s", msg) }
	if ValidateProcessID(r.ProcessID) != nil {
		return bad("processId")
	}
	if RequireNodeID(r.NodeID) != nil {
		return bad("nodeId")
	}
	switch r.State {
	case ProcessStateCompleted:
		if r.ExitCode == nil {
			return bad("completed without an exit code")
		}
	case ProcessStateCancelled:
	case ProcessStateRunning, ProcessStateOutcomeUnknown, ProcessStateNotFound:
		if r.ExitCode != nil || r.StdoutBase64 != nil || r.StderrBase64 != nil || !r.OutputTruncated {
			return bad(r.State + " must have null exit and outputs")
		}
	default:
		return bad("state")
	}
	if (r.StdoutBase64 == nil) != (r.StderrBase64 == nil) {
		return bad("outputs must be both known or both null")
	}
	if r.StdoutBase64 == nil && !r.OutputTruncated {
		return bad("null outputs require outputTruncated")
	}
	for _, s := range []*string{r.StdoutBase64, r.StderrBase64} {
		if s != nil {
			if _, err := base64.StdEncoding.Strict().DecodeString(*s); err != nil {
				return bad("output is not base64")
			}
		}
	}
	return nil
}

// exactFields splits a JSON object into its members and requires exactly
// the names in want: no missing, unknown, duplicate or case-variant keys
// (encoding/json would otherwise match keys case-insensitively and let the
// last duplicate win), and no invalid UTF-8 or unpaired surrogate escape
// (which encoding/json would turn into U+FFFD, changing argv or cwd).
func exactFields(raw json.RawMessage, want []string) (map[string]json.RawMessage, *Error) {
	trim := bytes.TrimSpace(raw)
	if len(trim) == 0 || trim[0] != '{' {
		return nil, InvalidParams("", "params must be a JSON object")
	}
	if err := CheckJSONLimits(trim); err != nil {
		return nil, InvalidParams("", "params must be a single JSON object within the JSON limits")
	}
	if !ValidJSONText(trim) {
		return nil, InvalidParams("", "params must be valid UTF-8 without unpaired surrogate escapes")
	}
	dec := json.NewDecoder(bytes.NewReader(trim))
	if _, err := dec.Token(); err != nil {
		return nil, InvalidParams("", "params must be a JSON object")
	}
	allowed := make(map[string]bool, len(want))
	for _, w := range want {
		allowed[w] = true
	}
	out := make(map[string]json.RawMessage, len(want))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, InvalidParams("", "params must be a JSON object")
		}
		key, _ := tok.(string)
		if !allowed[key] {
			// Name the field only when it looks like one: a key is request
			// content too.
			name := key
			if !isIdentifier(name) {
				name = "?"
			}
			return nil, InvalidParams(name, "unknown field "+name)
		}
		if _, dup := out[key]; dup {
			return nil, InvalidParams(key, "duplicate field "+key)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, InvalidParams(key, "field "+key+" is malformed")
		}
		out[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, InvalidParams("", "params must be a JSON object")
	}
	if dec.More() {
		return nil, InvalidParams("", "params must be a single JSON object")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err == nil {
		return nil, InvalidParams("", "params must be a single JSON object")
	}
	for _, w := range want {
		v, ok := out[w]
		if !ok || string(v) == "null" {
			return nil, InvalidParams(w, w+" is required")
		}
	}
	return out, nil
}

// isIdentifier reports whether s is 1–64 ASCII letters, digits or '_'.
func isIdentifier(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func decodeString(fields map[string]json.RawMessage, name string, dst *string) *Error {
	v := fields[name]
	if len(v) == 0 || v[0] != '"' {
		return InvalidParams(name, name+" must be a string")
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return InvalidParams(name, name+" must be a string")
	}
	return nil
}

// decodeInt accepts only a JSON integer literal (no fraction or exponent).
func decodeInt(fields map[string]json.RawMessage, name string, dst *int64) *Error {
	v := fields[name]
	for i, c := range v {
		if !(c >= '0' && c <= '9' || c == '-' && i == 0) {
			return InvalidParams(name, name+" must be an integer")
		}
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return InvalidParams(name, name+" must be an integer")
	}
	return nil
}

func init() {
	RegisterMethod(MethodSpec{
		Name:    MethodProcessRun,
		Version: 1,
		Validate: func(p json.RawMessage) *Error {
			_, err := ParseProcessRun(p)
			return err
		},
		Deadline: func(p json.RawMessage) time.Duration {
			var t struct {
				TimeoutMs int64 `json:"timeoutMs"`
			}
			if json.Unmarshal(p, &t) != nil || t.TimeoutMs < ProcessTimeoutMinMs || t.TimeoutMs > ProcessTimeoutMaxMs {
				return DefaultTimeoutMs * time.Millisecond
			}
			return ProcessRunDeadline(t.TimeoutMs)
		},
		CallerSlack:     ProcessCallerSlackMs * time.Millisecond,
		NoGenericInvoke: true,
	})
	for _, name := range []string{MethodProcessGet, MethodProcessCancel} {
		RegisterMethod(MethodSpec{
			Name:    name,
			Version: 1,
			Validate: func(p json.RawMessage) *Error {
				_, err := ParseProcessID(p)
				return err
			},
			NoGenericInvoke: true,
		})
	}
}

// decodeNodeAndProcessID decodes and checks the nodeId and processId every
// process method carries.
func decodeNodeAndProcessID(fields map[string]json.RawMessage, nodeID, processID *string) *Error {
	if err := decodeString(fields, "nodeId", nodeID); err != nil {
		return err
	}
	if err := RequireNodeID(*nodeID); err != nil {
		return err
	}
	if err := decodeString(fields, "processId", processID); err != nil {
		return err
	}
	return ValidateProcessID(*processID)
}
