package contract

// Argument and result types of the spawn host calls. Output bytes are
// invocation blobs, never JSON.
type (
	// SpawnRunArgs are the args of spawn.run: the validated
	// node.process.run request, with stdin as the id of the input blob the
	// host decoded from stdinBase64. TimeoutMs in ms, MaxOutputBytes in
	// bytes.
	SpawnRunArgs struct {
		ProcessID      string   `json:"processId"`
		Cwd            string   `json:"cwd"`
		Argv           []string `json:"argv"`
		StdinBlob      uint32   `json:"stdinBlob" doc:"id of the stdin input blob"`
		TimeoutMs      int64    `json:"timeoutMs" doc:"ms"`
		MaxOutputBytes int64    `json:"maxOutputBytes" doc:"bytes of stdout plus stderr to keep"`
	}
	// SpawnIDArgs are the args of spawn.result, spawn.get and spawn.cancel.
	SpawnIDArgs struct {
		ProcessID string `json:"processId"`
	}
	// SpawnReceipt is a receipt as the host calls return it: StdoutBlob and
	// StderrBlob are null when the output is unknown (then
	// OutputTruncated is true). The module names the blobs in its result
	// so the host base64-encodes them into stdoutBase64/stderrBase64.
	SpawnReceipt struct {
		State           string  `json:"state"`
		ExitCode        *int    `json:"exitCode"`
		StdoutBlob      *uint32 `json:"stdoutBlob"`
		StderrBlob      *uint32 `json:"stderrBlob"`
		OutputTruncated bool    `json:"outputTruncated"`
	}
	// SpawnRunResult is the result of spawn.run: Status "started" with the
	// Handle to suspend on, or "existing" with the Receipt of the id's
	// earlier run.
	SpawnRunResult struct {
		Status  string        `json:"status" doc:"\"started\" or \"existing\""`
		Handle  uint32        `json:"handle,omitempty" doc:"with \"started\": the handle to suspend on"`
		Receipt *SpawnReceipt `json:"receipt,omitempty" doc:"with \"existing\": the earlier run's receipt"`
	}
	// SpawnReceiptResult is the result of spawn.result and spawn.get, and
	// of spawn.cancel when the receipt is final; spawn.cancel instead
	// returns a Handle to suspend on while a signalled run is reaped.
	SpawnReceiptResult struct {
		Receipt *SpawnReceipt `json:"receipt,omitempty"`
		Handle  uint32        `json:"handle,omitempty" doc:"spawn.cancel only: suspend on it while the run is reaped"`
	}
)

// Spawn run states (SpawnRunResult.Status).
const (
	SpawnStarted  = "started"
	SpawnExisting = "existing"
)

// The spawn host calls, all under capability "exec".
var (
	SpawnRun    = Call[SpawnRunArgs, SpawnRunResult]{"spawn.run"}
	SpawnResult = Call[SpawnIDArgs, SpawnReceiptResult]{"spawn.result"}
	SpawnGet    = Call[SpawnIDArgs, SpawnReceiptResult]{"spawn.get"}
	SpawnCancel = Call[SpawnIDArgs, SpawnReceiptResult]{"spawn.cancel"}
)

func spawnSpecs() []Spec {
	return []Spec{
		spec(SpawnRun, "Starts a native process under the worker policy, or answers with the receipt of an earlier run of the same processId. The module suspends on the returned handle until the run ends."),
		spec(SpawnResult, "The final receipt of the run this request started (after resuming on spawn.run's handle)."),
		spec(SpawnGet, "Read-only receipt lookup by processId (not_found included)."),
		spec(SpawnCancel, "Cancels a run: answers the terminal receipt, or a handle to suspend on while the signalled run is reaped."),
	}
}
