package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"lemon/cluster"
)

// startKVBackend opens the KV buckets on a one-server embedded NATS with
// JetStream (temp dir, loopback); cleanup stops it.
func startKVBackend(t *testing.T, origin string) *kvBackend {
	t.Helper()
	emb, err := cluster.Start(cluster.Options{Name: "kv0", StateDir: t.TempDir(),
		Listen: freeLoopbackAddr(t), Secret: clusterTestSecret})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	nc, err := emb.Connect(origin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	b, err := openKV(nc, origin, 1)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func kvNode(t *testing.T, b *kvBackend, id string) (kvEnvelope, nodeRecord) {
	t.Helper()
	ent, err := b.kv[bucketNodes].Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var env kvEnvelope
	var rec nodeRecord
	if err := json.Unmarshal(ent.Value(), &env); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(env.Value, &rec); err != nil {
		t.Fatal(err)
	}
	return env, rec
}

// TestKVFlushWritesOnlyChanged flushes 3,000 node records into JetStream
// KV: the first flush writes all of them, a flush after 10 changed writes
// those 10 only, a record whose write failed is written by the next flush
// (and no other), an unchanged batch writes nothing, and a rename by
// another controller that lands between a record's read and its
// compare-and-swap survives the merge.
func TestKVFlushWritesOnlyChanged(t *testing.T) {
	const n = 3000
	b := startKVBackend(t, "c0")
	recs := make([]nodeRecord, n)
	ops := make([]op, n)
	for i := range recs {
		recs[i] = nodeRecord{ID: fmt.Sprintf("node-%04d", i), Name: fmt.Sprintf("n%d", i),
			Identity: "token", LastSeenAtMs: 1000, Methods: map[string]int{"fs.read": 1}}
		ops[i] = op{bucket: bucketNodes, key: recs[i].ID, value: recs[i]}
	}
	if err := b.apply(ops); err != nil {
		t.Fatal(err)
	}

	var (
		mu       sync.Mutex
		writes   = map[string]int{}
		fail     = map[string]bool{}
		active   atomic.Int32
		maxInFly atomic.Int32
	)
	b.testHookUpdate = func(id string) error {
		a := active.Add(1)
		defer active.Add(-1)
		for m := maxInFly.Load(); a > m && !maxInFly.CompareAndSwap(m, a); m = maxInFly.Load() {
		}
		mu.Lock()
		defer mu.Unlock()
		writes[id]++
		if fail[id] {
			return errors.New("planted failure")
		}
		return nil
	}
	flush := func() (map[string]int, error) {
		t.Helper()
		mu.Lock()
		clear(writes)
		mu.Unlock()
		err := b.writeSnapshots(recs)
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(writes), err
	}

	got, err := flush()
	if err != nil || len(got) != n {
		t.Fatalf("first flush: %d records written, err %v; want %d, nil", len(got), err, n)
	}
	if m := maxInFly.Load(); m > kvFlushWorkers {
		t.Fatalf("%d writes in flight, the bound is %d", m, kvFlushWorkers)
	}

	got, err = flush()
	if err != nil || len(got) != 0 {
		t.Fatalf("unchanged flush: %d records written, err %v; want 0, nil", len(got), err)
	}

	// Ten records change; one of them fails.
	for i := 0; i < 10; i++ {
		recs[i*100].LastSeenAtMs = 5000
		recs[i*100].ModuleSetDigest = "d2"
	}
	mu.Lock()
	fail[recs[300].ID] = true
	mu.Unlock()
	got, err = flush()
	if err == nil || !strings.Contains(err.Error(), "1 of 10 node records not flushed") {
		t.Fatalf("flush with a planted failure: err %v", err)
	}
	if len(got) != 10 {
		t.Fatalf("changed flush wrote %d records, want 10: %v", len(got), got)
	}
	if _, rec := kvNode(t, b, recs[300].ID); rec.LastSeenAtMs != 1000 {
		t.Fatalf("failed record stored lastSeen %d, want the old 1000", rec.LastSeenAtMs)
	}
	if _, rec := kvNode(t, b, recs[200].ID); rec.LastSeenAtMs != 5000 || rec.ModuleSetDigest != "d2" {
		t.Fatalf("changed record stored %+v", rec)
	}

	// The next flush retries the failed record, and only it.
	mu.Lock()
	fail[recs[300].ID] = false
	mu.Unlock()
	got, err = flush()
	if err != nil || len(got) != 1 || got[recs[300].ID] != 1 {
		t.Fatalf("retry flush: wrote %v, err %v; want only %s", got, err, recs[300].ID)
	}
	if _, rec := kvNode(t, b, recs[300].ID); rec.LastSeenAtMs != 5000 || rec.ModuleSetDigest != "d2" {
		t.Fatalf("retried record stored %+v", rec)
	}
	got, err = flush()
	if err != nil || len(got) != 0 {
		t.Fatalf("flush after the retry: wrote %v, err %v; want nothing", got, err)
	}

	// Another controller renames a record between this flush's read and
	// its compare-and-swap: the swap fails, the record is read again and
	// the rename is kept.
	id := recs[7].ID
	recs[7].LastSeenAtMs = 9000
	renamed := false
	b.testHookUpdate = func(got string) error {
		if got == id && !renamed {
			renamed = true
			_, cur := kvNode(t, b, id)
			cur.Name = "renamed-elsewhere"
			raw, _ := json.Marshal(cur)
			env, _ := json.Marshal(kvEnvelope{Origin: "c1", Value: raw})
			if _, err := b.kv[bucketNodes].Put(context.Background(), id, env); err != nil {
				return err
			}
		}
		return nil
	}
	if err := b.writeSnapshots(recs); err != nil {
		t.Fatal(err)
	}
	env, rec := kvNode(t, b, id)
	if !renamed || rec.Name != "renamed-elsewhere" || rec.LastSeenAtMs != 9000 || env.Origin != "c0" {
		t.Fatalf("after a concurrent rename: origin %s, %+v", env.Origin, rec)
	}
}
