package fs

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gorilla/websocket"
	"golang.org/x/sys/unix"

	"lemon/hostcalls/contract"
	"lemon/hostcalls/datadial"
	"lemon/protocol"
)

// TestReceiveExpect: fs.receive's raw expectation (docs/FS.md,
// "Transfers"). Contradictory ones are invalid_params before any data
// connection; an mtime range is compared at the rename to the
// nanosecond (one past either bound fails, the exact bounds pass), as is
// an identity; a refusal after the transfer is precondition_failed with
// mutationMayHaveApplied (the part file) and leaves the file.
func TestReceiveExpect(t *testing.T) {
	e := newEnv(t, []node{{path: "root/f", file: "old"}}, "root")
	path := filepath.Join(e.tmp, "root", "f")
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	ns := mtimeNs(&st)
	data := []byte("new")
	at := func(v int64) *int64 { return &v }
	dialled := false
	noDial := datadial.WithDataDialer(context.Background(), func(context.Context, string) (*websocket.Conn, error) {
		dialled = true
		return nil, os.ErrClosed
	})
	for name, a := range map[string]contract.FSReceiveArgs{
		"absent with replace":      {Replace: true, Expect: contract.FSExpect{Absent: true}},
		"mtime without replace":    {Expect: contract.FSExpect{MtimeNsMin: at(ns)}},
		"identity without replace": {Expect: contract.FSExpect{Dev: st.Dev, Ino: st.Ino}},
		"absent with mtime":        {Replace: true, Expect: contract.FSExpect{Absent: true, MtimeNsMax: at(ns)}},
		"tree with mtime":          {Tree: true, Replace: true, Expect: contract.FSExpect{MtimeNsMin: at(ns)}},
	} {
		a.Path, a.Size, a.DataTicket = "f", int64(len(data)), ticket
		if a.Tree {
			a.Size = 0
		}
		_, err := e.f.Receive(noDial, a)
		if pe := protocol.AsError(err); pe == nil || pe.Code != protocol.CodeInvalidParams || dialled {
			t.Errorf("%s: %v (dialled %v), want invalid_params before any data connection", name, err, dialled)
		}
	}
	if _, err := e.f.Receive(noDial, contract.FSReceiveArgs{Path: "missing", Size: 1, DataTicket: ticket, Replace: true,
		Expect: contract.FSExpect{MtimeNsMin: at(0)}}); protocol.AsError(err).DomainCode() != contract.FSPreconditionFailed ||
		protocol.AsError(err).Details.Field != contract.FSFieldPresent || dialled {
		t.Errorf("expecting a missing file: %v (dialled %v), want precondition_failed (present) before any data connection", err, dialled)
	}
	for name, tc := range map[string]struct {
		exp   contract.FSExpect
		field string
	}{
		"min one ns past":  {contract.FSExpect{MtimeNsMin: at(ns + 1)}, contract.FSFieldMtime},
		"max one ns short": {contract.FSExpect{MtimeNsMax: at(ns - 1)}, contract.FSFieldMtime},
		"other inode":      {contract.FSExpect{Dev: st.Dev, Ino: st.Ino + 1}, contract.FSFieldIdentity},
	} {
		_, err := e.f.Receive(withCaller(t, putScript(data, sumHex(data), nil)),
			contract.FSReceiveArgs{Path: "f", Size: int64(len(data)), DataTicket: ticket, Replace: true, Expect: tc.exp})
		pe := protocol.AsError(err)
		if pe.DomainCode() != contract.FSPreconditionFailed || pe.Details.Field != tc.field ||
			pe.Details.MutationMayHaveApplied == nil || !*pe.Details.MutationMayHaveApplied {
			t.Errorf("%s: %v, want precondition_failed (%s) with mutationMayHaveApplied", name, err, tc.field)
		}
		if b, _ := os.ReadFile(path); string(b) != "old" {
			t.Fatalf("%s: the file changed: %q", name, b)
		}
	}
	r, err := e.f.Receive(withCaller(t, putScript(data, sumHex(data), nil)), contract.FSReceiveArgs{Path: "f", Size: int64(len(data)),
		DataTicket: ticket, Replace: true, Expect: contract.FSExpect{MtimeNsMin: at(ns), MtimeNsMax: at(ns), Dev: st.Dev, Ino: st.Ino}})
	if err != nil || r.Path != path || r.SHA256 != sumHex(data) || r.Size != int64(len(data)) {
		t.Fatalf("exact bounds and identity: %+v %v", r, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("after the put: %q", b)
	}
}
