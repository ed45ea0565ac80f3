package fs

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// Tests of the mutation primitives' own compares (the decisions built on
// them are the fs module's: plugins/fs).

func statNs(t *testing.T, e *env, rel string) (ns int64, dev, ino uint64) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(e.abs(rel), &st); err != nil {
		t.Fatal(err)
	}
	return st.Mtim.Sec*1e9 + st.Mtim.Nsec, st.Dev, st.Ino
}

func wantPrecondition(t *testing.T, what string, err error, field string) {
	t.Helper()
	pe := protocol.AsError(err)
	if pe == nil || pe.Code != protocol.CodeConflict || pe.DomainCode() != contract.FSPreconditionFailed || pe.Details.Field != field {
		t.Errorf("%s: %v, want precondition_failed %s", what, err, field)
	}
}

func i64(v int64) *int64 { return &v }

// TestWriteAtExpectations: the mtime range is inclusive at both ends and
// one nanosecond past either end refuses; an identity must match; absent
// refuses an existing name; nothing expected writes what is there;
// mtimeNsAfter is the least mtime afterwards.
func TestWriteAtExpectations(t *testing.T) {
	e := newEnv(t, []node{{path: "root/f", file: "old"}}, "root")
	ns, dev, ino := statNs(t, e, "root/f")
	w := func(exp contract.FSExpect, after int64) (*contract.FSWriteAtResult, error) {
		return e.f.WriteAt(contract.FSWriteAtArgs{Path: "f", Truncate: true, Expect: exp, MtimeNsAfter: after}, []byte("new"))
	}
	for _, c := range []struct {
		name  string
		exp   contract.FSExpect
		field string
	}{
		{"min one past", contract.FSExpect{MtimeNsMin: i64(ns + 1)}, contract.FSFieldMtime},
		{"max one below", contract.FSExpect{MtimeNsMax: i64(ns - 1)}, contract.FSFieldMtime},
		{"other inode", contract.FSExpect{Dev: dev, Ino: ino + 1}, contract.FSFieldIdentity},
		{"absent", contract.FSExpect{Absent: true}, contract.FSFieldAbsent},
	} {
		_, err := w(c.exp, 0)
		wantPrecondition(t, c.name, err, c.field)
	}
	if e.content("root/f") != "old" {
		t.Fatal("a refused write changed the file")
	}
	if _, err := w(contract.FSExpect{Absent: true, MtimeNsMin: i64(ns)}, 0); protocol.AsError(err).Details.Field != "expect" {
		t.Errorf("absent with an mtime: %v", err)
	}
	future := time.Now().Add(time.Hour).UnixNano()
	r, err := w(contract.FSExpect{MtimeNsMin: i64(ns), MtimeNsMax: i64(ns), Dev: dev, Ino: ino}, future)
	if err != nil || r.MtimeNs != future || r.Dev != dev || r.Ino != ino || r.Created || e.content("root/f") != "new" {
		t.Fatalf("exact range: %+v %v", r, err)
	}
	if got, _, _ := statNs(t, e, "root/f"); got != future {
		t.Errorf("mtimeNsAfter: %d, want %d", got, future)
	}
	// Nothing expected: an existing file is written, a missing one created.
	if r, err := w(contract.FSExpect{}, 0); err != nil || r.Created {
		t.Errorf("no expectation, existing: %+v %v", r, err)
	}
	r, err = e.f.WriteAt(contract.FSWriteAtArgs{Path: "g", Expect: contract.FSExpect{}}, []byte("g"))
	if err != nil || !r.Created || e.content("root/g") != "g" {
		t.Errorf("no expectation, missing: %+v %v", r, err)
	}
	// Expecting an existing file that is missing: present, no parents made.
	_, err = e.f.WriteAt(contract.FSWriteAtArgs{Path: "p/q", Mkdirs: true, Expect: contract.FSExpect{MtimeNsMin: i64(0)}}, nil)
	wantPrecondition(t, "missing with mkdirs", err, contract.FSFieldPresent)
	if e.exists("root/p") {
		t.Error("a refused write made a parent")
	}
}

// TestRenameSameAndExpect: one entry under two names is Same (nothing
// moved, nothing compared); a captured source whose mtime is out of range
// is renamed back.
func TestRenameSameAndExpect(t *testing.T) {
	e := newEnv(t, []node{{path: "root/a", file: "A"}, {path: "root/la", symlink: "a"}}, "root")
	ns, _, _ := statNs(t, e, "root/a")
	r, err := e.f.Rename(contract.FSRenameArgs{Path: "la", Destination: "a", Expect: contract.FSExpect{MtimeNsMin: i64(ns + 1)}})
	if err != nil || !r.Same || r.MtimeNs != ns || e.content("root/a") != "A" {
		t.Fatalf("same: %+v %v", r, err)
	}
	_, err = e.f.Rename(contract.FSRenameArgs{Path: "a", Destination: "b", Expect: contract.FSExpect{MtimeNsMax: i64(ns - 1)}})
	wantPrecondition(t, "stale source", err, contract.FSFieldMtime)
	if e.content("root/a") != "A" || e.exists("root/b") || len(e.dirNames("root")) != 2 {
		t.Errorf("stale source moved: %v", e.dirNames("root"))
	}
}

// TestRemoveBoundToInodeAndDigest: fs.remove refuses another inode, a
// changed tree (nothing removed) and a vanished name.
func TestRemoveBoundToInodeAndDigest(t *testing.T) {
	e := newEnv(t, []node{{path: "root/t/a", file: "a"}, {path: "root/t/b", file: "b"}}, "root")
	lim := contract.FSWalkArgs{Path: "t", Recursive: true, MaxEntries: 10, MaxDepth: 4, MaxBytes: 1 << 20, EntryOverhead: 64}
	w, err := e.f.Walk(lim)
	if err != nil || w.Entries != 3 || w.Children != 2 || len(w.TreeDigest) != 64 || w.Type != "directory" {
		t.Fatalf("walk: %+v %v", w, err)
	}
	rm := func(dev, ino uint64, digest string) error {
		_, err := e.f.Remove(contract.FSRemoveArgs{Path: "t", Dev: dev, Ino: ino, Recursive: true, TreeDigest: digest,
			MaxEntries: lim.MaxEntries, MaxDepth: lim.MaxDepth, MaxBytes: lim.MaxBytes, EntryOverhead: lim.EntryOverhead})
		return err
	}
	wantPrecondition(t, "other inode", rm(w.Dev, w.Ino+1, w.TreeDigest), contract.FSFieldIdentity)
	os.WriteFile(e.abs("root/t/b"), []byte("bb"), 0o644)
	wantPrecondition(t, "changed tree", rm(w.Dev, w.Ino, w.TreeDigest), contract.FSFieldIdentity)
	if e.content("root/t/a") != "a" || len(e.dirNames("root")) != 1 {
		t.Fatalf("a refused remove changed the tree: %v", e.dirNames("root"))
	}
	w2, _ := e.f.Walk(lim)
	if w2.TreeDigest == w.TreeDigest {
		t.Fatal("the digest did not see the change")
	}
	if err := rm(w2.Dev, w2.Ino, w2.TreeDigest); err != nil || e.exists("root/t") {
		t.Fatalf("remove: %v", err)
	}
	wantPrecondition(t, "gone", rm(w2.Dev, w2.Ino, w2.TreeDigest), contract.FSFieldPresent)
}
