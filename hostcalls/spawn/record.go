package spawn

import (
	"encoding/json"
	"errors"

	"lemon/protocol"
)

// Stop reasons: spawn.wait reports them (SpawnExit.Stopped).
const (
	reasonTimeout  = "timeout"
	reasonOverflow = "output_overflow"
	reasonCancel   = "cancel"
	reasonAborted  = "request_ended"
	reasonShutdown = "worker_shutdown"
)

// record is a run's containment record (p/<run>): where its processes
// live, so that a restarted worker stops them, and bounded admission
// metadata. It never holds argv, cwd, stdin or output.
type record struct {
	V          int    `json:"v"`
	State      string `json:"state"`
	Generation uint64 `json:"generation"`
	AdmittedMs int64  `json:"admittedMs"`
	// Principal is the execution context's principal the run belongs to;
	// "" for a request without one.
	Principal string `json:"principal,omitempty"`

	// Where the run's processes live, so that a restarted
	// worker can stop them (docs/PROCESS.md, "Containment"): the run's
	// cgroup, or its leader's pid with its start time (clock ticks after
	// boot, /proc/PID/stat field 22), and the boot id both belong to.
	Cgroup   string `json:"cgroup,omitempty"`
	Pid      int    `json:"pid,omitempty"`
	PidStart uint64 `json:"pidStart,omitempty"`
	Boot     string `json:"boot,omitempty"`
}

func (r record) encode() []byte {
	b, _ := json.Marshal(r)
	return b
}

var errBadRecord = errors.New("spawn: malformed containment record")

func decodeRecord(b []byte) (record, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil || r.V != 1 {
		return r, errBadRecord
	}
	switch r.State {
	case protocol.ProcessStateRunning, protocol.ProcessStateCompleted, protocol.ProcessStateCancelled, protocol.ProcessStateOutcomeUnknown:
	default:
		return r, errBadRecord
	}
	return r, nil
}

// errNotOwner refuses a call on another principal's run.
func errNotOwner() *protocol.Error {
	return protocol.DomainError(protocol.CodeForbidden, protocol.DomainProcessNotOwner,
		"the process belongs to another principal").WithRetry(false, false)
}
