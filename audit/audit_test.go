package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)

func rec() *Record {
	return &Record{Time: t0, Source: "controller", Principal: "alice", Scopes: []string{"operator.read"},
		Method: "node.fs.stat", NodeID: "n-1", InvokeID: "0123456789abcdef0123456789abcdef",
		Outcome: "ok", DurationMs: 1.5}
}

func recLen(t *testing.T) int {
	b, err := json.Marshal(rec())
	if err != nil {
		t.Fatal(err)
	}
	return len(b) + 1
}

// disk accepts writes until cap bytes are used, as a full file system.
type disk struct {
	cap, used int
	data      []byte
}

var errFull = errors.New("no space left on device /secret/path")

func (d *disk) Write(p []byte) (int, error) {
	if d.used+len(p) > d.cap {
		return 0, errFull
	}
	d.used += len(p)
	d.data = append(d.data, p...)
	return len(p), nil
}

func TestRecordLine(t *testing.T) {
	d := &disk{cap: 1 << 20}
	s := New(d, false)
	if err := s.Write(rec()); err != nil {
		t.Fatal(err)
	}
	want := `{"time":"2026-12-01T20:00:00Z","source":"controller","principal":"alice","scopes":["operator.read"],"method":"node.fs.stat","nodeId":"n-1","invokeId":"0123456789abcdef0123456789abcdef","outcome":"ok","durationMs":1.5}` + "\n"
	if string(d.data) != want {
		t.Fatalf("line:\n%s\nwant:\n%s", d.data, want)
	}
}

func TestFieldBound(t *testing.T) {
	d := &disk{cap: 1 << 20}
	s := New(d, false)
	r := rec()
	r.Method = strings.Repeat("m", MaxField)
	r.Code = strings.Repeat("c", MaxField+1)
	s.Write(r)
	var got Record
	if err := json.Unmarshal(d.data, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Method) != MaxField || len(got.Code) != MaxField {
		t.Fatalf("method %d code %d bytes, want %d each", len(got.Method), len(got.Code), MaxField)
	}
}

// TestFailClosedBoundary: a sink whose disk holds exactly k records
// admits after the k-th write, refuses after the (k+1)-th fails, and
// heals at the first write that succeeds again.
func TestFailClosedBoundary(t *testing.T) {
	const k = 3
	d := &disk{cap: k * recLen(t)}
	s := New(d, true)
	for i := range k {
		if err := s.Write(rec()); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if err := s.Admit(); err != nil || !s.Healthy() {
		t.Fatalf("at capacity: admit %v healthy %v", err, s.Healthy())
	}
	err := s.Write(rec())
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("one past capacity: %v", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("error carries the writer's text: %v", err)
	}
	if err := s.Admit(); !errors.Is(err, ErrUnavailable) || s.Healthy() {
		t.Fatalf("after a failed write: admit %v healthy %v", err, s.Healthy())
	}
	if w, f := s.Counts(); w != k || f != 1 {
		t.Fatalf("counts %d/%d", w, f)
	}
	d.cap += recLen(t)
	if err := s.Write(rec()); err != nil {
		t.Fatal(err)
	}
	if err := s.Admit(); err != nil || !s.Healthy() {
		t.Fatalf("healed: admit %v healthy %v", err, s.Healthy())
	}
}

func TestFailOpenAdmits(t *testing.T) {
	s := New(&disk{}, false)
	if s.Write(rec()) == nil {
		t.Fatal("write to a full disk succeeded")
	}
	if s.Healthy() {
		t.Fatal("healthy after a failure")
	}
	if err := s.Admit(); err != nil {
		t.Fatalf("fail-open sink refused: %v", err)
	}
}

func TestProbeHeals(t *testing.T) {
	d := &disk{}
	s := New(d, true)
	s.Write(rec())
	if s.Probe("controller") {
		t.Fatal("probe healthy on a full disk")
	}
	d.cap = 1 << 10
	s.lastProbe.Store(0)
	if !s.Probe("controller") {
		t.Fatal("probe did not heal")
	}
	if !strings.Contains(string(d.data), `"method":"audit.probe"`) {
		t.Fatalf("probe record: %s", d.data)
	}
}

func TestNilSink(t *testing.T) {
	var s *Sink
	if s.Write(rec()) != nil || s.Admit() != nil || !s.Healthy() || s.Close() != nil {
		t.Fatal("nil sink is not a no-op")
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(Config{}); err == nil {
		t.Fatal("empty file accepted")
	}
	_, err := Open(Config{File: filepath.Join(t.TempDir(), "missing-canary-dir", "audit.jsonl")})
	if err == nil || strings.Contains(err.Error(), "canary") {
		t.Fatalf("open in a missing dir: %v", err)
	}
}

// TestRotation: with MaxSizeMB 1 a file holding exactly the records that
// fit 1 MiB is not rotated; one more record rotates it into a backup, and
// only MaxBackups backups are kept.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "audit.jsonl")
	s, err := Open(Config{File: file, MaxSizeMB: 1, MaxBackups: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, _ := os.Stat(file)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
	n := (1 << 20) / recLen(t)
	for range n {
		if err := s.Write(rec()); err != nil {
			t.Fatal(err)
		}
	}
	if got := files(t, dir); got != 1 {
		t.Fatalf("%d files at the limit, want 1", got)
	}
	s.Write(rec())
	if got := files(t, dir); got != 2 {
		t.Fatalf("%d files one past the limit, want 2", got)
	}
	if lines(t, file) != 1 {
		t.Fatalf("current file holds %d lines after rotation", lines(t, file))
	}
	for range n {
		s.Write(rec())
	}
	deadline := time.Now().Add(5 * time.Second)
	for files(t, dir) != 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := files(t, dir); got != 2 {
		t.Fatalf("%d files with MaxBackups 1, want 2", got)
	}
}

func files(t *testing.T, dir string) int {
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

func lines(t *testing.T, file string) int {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
	}
	return n
}

// BenchmarkSinkWriteFile is one record written to a rotated file
// (docs/BENCHMARKS.md).
func BenchmarkSinkWriteFile(b *testing.B) {
	s, err := Open(Config{File: filepath.Join(b.TempDir(), "audit.jsonl")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r := rec()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Write(r); err != nil {
			b.Fatal(err)
		}
	}
}
