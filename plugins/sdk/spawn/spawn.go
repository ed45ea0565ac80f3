// Package spawn is the typed guest wrapper of the spawn host calls
// (docs/HOSTCALLS.md): native processes under the worker policy, with
// durable receipts. All need capability "exec"; list the calls used in
// the manifest's HostCalls. A run in progress is a suspension: return
// sdk.Suspend{Handle} and collect the receipt with Result on resume.
// Errors are *protocol.Error values.
package spawn

import (
	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
)

// Run starts a process (spawn.run): Status contract.SpawnStarted with the
// Handle to suspend on, or contract.SpawnExisting with the Receipt of the
// id's earlier run.
func Run(args contract.SpawnRunArgs) (contract.SpawnRunResult, error) {
	return sdk.Invoke(spawnRun, contract.SpawnRun, args)
}

// Result returns the final receipt of the run this request started
// (spawn.result), after resuming on Run's handle.
func Result(processID string) (contract.SpawnReceiptResult, error) {
	return sdk.Invoke(spawnResult, contract.SpawnResult, contract.SpawnIDArgs{ProcessID: processID})
}

// Get looks up the receipt of processID (spawn.get).
func Get(processID string) (contract.SpawnReceiptResult, error) {
	return sdk.Invoke(spawnGet, contract.SpawnGet, contract.SpawnIDArgs{ProcessID: processID})
}

// Cancel cancels processID's run (spawn.cancel): the terminal Receipt, or
// a Handle to suspend on while the signalled run is reaped.
func Cancel(processID string) (contract.SpawnReceiptResult, error) {
	return sdk.Invoke(spawnCancel, contract.SpawnCancel, contract.SpawnIDArgs{ProcessID: processID})
}

// The spawn primitives (docs/PROCESS.md, "Spawn primitives"): a process as
// an effect, with no receipt. The host keeps the limits, the command
// policy, confinement, containment, one group signal per run and
// ownership by principal; idempotence and retention are the caller's.

// Start starts argv in cwd with stdin from input blob stdinBlob
// (spawn.start): the run id, and a Handle to suspend on
// (sdk.Suspend{Handle}) until the run ends; then call Wait.
func Start(args contract.SpawnStartArgs) (contract.SpawnStartResult, error) {
	return sdk.Invoke(spawnStart, contract.SpawnStart, args)
}

// Wait reports how run ended (spawn.wait): State contract.SpawnExited
// with Exit (exit status or signal, stop reason, times, output blobs),
// contract.SpawnRunning with a Handle to suspend on, or
// contract.SpawnUnknown when this worker has no such run.
func Wait(run string) (contract.SpawnWaitResult, error) {
	return sdk.Invoke(spawnWait, contract.SpawnWait, contract.SpawnRunRef{Run: run})
}

// Signal stops run (spawn.signal): its group gets one SIGKILL, never a
// second. Outcome is contract.SpawnSignalSent, SpawnSignalGone,
// SpawnSignalAlready, SpawnExited or SpawnUnknown.
func Signal(run string) (contract.SpawnSignalResult, error) {
	return sdk.Invoke(spawnSignal, contract.SpawnSignal, contract.SpawnRunRef{Run: run})
}

// Release forgets ended run and its output (spawn.release); Released is
// false when this worker has no such ended run. The host keeps at most the
// 64 most recent ended runs until they are released.
func Release(run string) (contract.SpawnReleaseResult, error) {
	return sdk.Invoke(spawnRelease, contract.SpawnRelease, contract.SpawnRunRef{Run: run})
}
