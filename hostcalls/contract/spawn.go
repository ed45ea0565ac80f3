package contract

// Argument and result types of the spawn primitives (spawn.start,
// spawn.wait, spawn.signal): a process as an effect, with no receipt,
// retention or idempotence decision of their own. A run is named by a
// node-local run id, valid until the worker restarts; the module that
// keeps receipts stores it (docs/PROCESS.md, "Spawn primitives").
type (
	// SpawnStartArgs are the args of spawn.start. Cwd is a directory
	// path admitted under the node's roots (or the execution context's
	// workspace) and pinned by descriptor; StdinBlob names an input blob
	// (its bytes are written to stdin, then EOF). Argv, Cwd, TimeoutMs and
	// MaxOutputBytes obey the node.process.run limits (docs/PROCESS.md).
	SpawnStartArgs struct {
		Argv           []string `json:"argv"`
		Cwd            string   `json:"cwd" doc:"directory path under the allowed roots"`
		StdinBlob      uint32   `json:"stdinBlob" doc:"id of the stdin input blob"`
		TimeoutMs      int64    `json:"timeoutMs" doc:"ms, 1000..1800000; the host signals the group when it passes"`
		MaxOutputBytes int64    `json:"maxOutputBytes" doc:"bytes of stdout plus stderr to keep, 1..1048576; one byte more signals the group"`
		// Run, when set, is the run id to use ("r" and 16 lowercase hex
		// digits), chosen by the caller so that it can record the id
		// durably before the start; "" lets the host draw one.
		Run string `json:"run,omitempty" doc:"optional: the run id to use (r + 16 lowercase hex), e.g. recorded before the start; one this worker knows is CONFLICT already_exists"`
	}
	// SpawnStartResult is the result of spawn.start: the run id and a
	// handle that completes when the run has ended (suspend on it, then
	// call spawn.wait).
	SpawnStartResult struct {
		Run    string `json:"run" doc:"node-local run id"`
		Handle uint32 `json:"handle" doc:"suspend on it until the run ends"`
	}
	// SpawnRunRef are the args of spawn.wait and spawn.signal.
	SpawnRunRef struct {
		Run string `json:"run"`
	}
	// SpawnExit is how a run ended. ExitCode is the exit status when the
	// process exited, Signal the number of the signal that ended it (0 if
	// none); both unknown (null, 0) when no wait status was observed.
	// Stopped is the reason the host signalled the run's group
	// ("timeout", "output_overflow", "cancel", "request_ended",
	// "worker_shutdown"), "" when it never did or its signal found the
	// group gone. SignalFailed: the one group signal failed, the outcome
	// is unknown. Output blobs are null when the invocation's result room
	// cannot carry them (OutputTruncated is then true).
	SpawnExit struct {
		ExitCode        *int    `json:"exitCode"`
		Signal          int     `json:"signal"`
		Stopped         string  `json:"stopped"`
		SignalFailed    bool    `json:"signalFailed"`
		StartedMs       int64   `json:"startedMs" doc:"unix ms"`
		EndedMs         int64   `json:"endedMs" doc:"unix ms"`
		StdoutBlob      *uint32 `json:"stdoutBlob"`
		StderrBlob      *uint32 `json:"stderrBlob"`
		OutputTruncated bool    `json:"outputTruncated" doc:"the cap cut output, a pipe outlived WaitDelay, or blobs are null"`
	}
	// SpawnWaitResult is the result of spawn.wait: State "running" with a
	// Handle to suspend on, "exited" with Exit, "starting" while a
	// spawn.start given this run id is in flight (ask again), or "unknown"
	// when this worker has no such run (it was started by a worker before
	// a restart, was never started, was released, or was forgotten: older
	// than its principal's 64 most recent ended runs, or past the node's
	// 1,024 ended runs or 64 MiB of their output, which forgets the
	// oldest run of the principal holding the most).
	SpawnWaitResult struct {
		State  string     `json:"state" doc:"\"running\", \"exited\", \"starting\" or \"unknown\""`
		Handle uint32     `json:"handle,omitempty" doc:"with \"running\": suspend on it"`
		Exit   *SpawnExit `json:"exit,omitempty" doc:"with \"exited\""`
	}
	// SpawnReleaseResult is the result of spawn.release: Released is
	// false when this worker had no such ended run (unknown, released
	// before, or still running).
	SpawnReleaseResult struct {
		Released bool `json:"released"`
	}
	// SpawnSignalResult is the result of spawn.signal: "sent" (the group
	// got its one SIGKILL now), "gone" (no member was left), "already"
	// (the run was signalled before: never twice), "exited" (the run had
	// ended) or "unknown" (no such run on this worker).
	SpawnSignalResult struct {
		Outcome string `json:"outcome" doc:"\"sent\", \"gone\", \"already\", \"exited\" or \"unknown\""`
	}
)

// spawn.wait states and spawn.signal outcomes.
const (
	SpawnRunning  = "running"
	SpawnStarting = "starting"
	SpawnExited   = "exited"
	SpawnUnknown  = "unknown"

	SpawnSignalSent    = "sent"
	SpawnSignalGone    = "gone"
	SpawnSignalAlready = "already"
)

// The spawn host calls, all under capability "exec".
var (
	SpawnStart   = Call[SpawnStartArgs, SpawnStartResult]{"spawn.start"}
	SpawnWait    = Call[SpawnRunRef, SpawnWaitResult]{"spawn.wait"}
	SpawnSignal  = Call[SpawnRunRef, SpawnSignalResult]{"spawn.signal"}
	SpawnRelease = Call[SpawnRunRef, SpawnReleaseResult]{"spawn.release"}
)

func spawnSpecs() []Spec {
	return []Spec{
		spec(SpawnStart, "Primitive: starts argv in the admitted cwd with stdin from a blob, under the command policy, the context's limits and containment; returns a run id and a handle that completes when the run ends. No receipt is kept."),
		spec(SpawnWait, "Primitive: how a run of this principal ended (exit status, signal, stop reason, times, output blobs), or a handle to suspend on while it runs."),
		spec(SpawnSignal, "Primitive: stops a run of this principal: its group gets one SIGKILL, never a second."),
		spec(SpawnRelease, "Primitive: forgets an ended run of this principal and its output (the host keeps at most the 64 most recent ended runs of each principal until released, and 1,024 runs or 64 MiB of output on the node)."),
	}
}
