package vault

import (
	"fmt"
	"testing"
)

// BenchmarkSetWithReceipt: one node.secrets.set with an operationId, a
// 32-byte value, a fresh name each time (fsync'd commit included).
func BenchmarkSetWithReceipt(b *testing.B) {
	f := newFixture(b)
	value := []byte("0123456789abcdef0123456789abcdef")
	i := 0
	for b.Loop() {
		op := fmt.Sprintf("op-%d", i)
		if _, err := modSet(f.v, modReq{NodeID: "n1", Name: fmt.Sprintf("bench/%d", i), Value: value, OperationID: &op}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkSetRepeat: the reconciliation path, a repeated set that returns
// the original success without writing.
func BenchmarkSetRepeat(b *testing.B) {
	f := newFixture(b)
	value := []byte("0123456789abcdef0123456789abcdef")
	op := "op-1"
	mustSet(b, f.v, "n1", "bench", string(value), &op)
	for b.Loop() {
		if _, err := modSet(f.v, modReq{NodeID: "n1", Name: "bench", Value: value, OperationID: &op}); err != nil {
			b.Fatal(err)
		}
	}
	if f.v.Writes() != 1 {
		b.Fatalf("writes = %d", f.v.Writes())
	}
}

// BenchmarkList500: node.secrets.list over 500 names of 40 bytes (36 + 4 digits).
func BenchmarkList500(b *testing.B) {
	f := newFixture(b)
	for i := 0; i < 500; i++ {
		mustSet(b, f.v, "n1", fmt.Sprintf("integration/service-%06d/api-token", i), "v", nil)
	}
	for b.Loop() {
		l, err := f.v.List(500)
		if err != nil || len(l.Names) != 500 {
			b.Fatal(err)
		}
	}
}

// BenchmarkReceipt: the record behind node.secrets.receipt of an applied operation.
func BenchmarkReceipt(b *testing.B) {
	f := newFixture(b)
	op := "op-1"
	mustSet(b, f.v, "n1", "bench", "v", &op)
	for b.Loop() {
		if r, err := f.v.Record(LegacyReceiptFamily, LegacyReceiptKey("n1", op)); err != nil || !r.Found {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen500: New on a vault of 500 names (decrypts all metadata).
func BenchmarkOpen500(b *testing.B) {
	f := newFixture(b)
	for i := 0; i < 500; i++ {
		op := fmt.Sprintf("op-%d", i)
		mustSet(b, f.v, "n1", fmt.Sprintf("integration/service-%06d/api-token", i), "v", &op)
	}
	f.v.Close()
	for b.Loop() {
		v, err := New(Config{Dir: f.dir, KeyFile: f.keyFile})
		if err != nil {
			b.Fatal(err)
		}
		v.Close()
	}
}
