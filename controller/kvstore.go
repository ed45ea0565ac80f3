package controller

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"lemon/protocol"
)

// JetStream KV buckets of a clustered controller (docs/CLUSTER.md,
// "State"): the bbolt buckets of store.go, plus the holders of node
// sockets. Values of the first three are kvEnvelope; holders are
// holderRecord.
const (
	kvNodes    = "lemon_nodes"
	kvSessions = "lemon_sessions"
	kvPairings = "lemon_pairings"
	kvHolders  = "lemon_holders"
	// kvApprovals holds requests waiting for approval (approvalRecord,
	// docs/CLUSTER.md, "Approvals"); kvGrants the once-grants (key: the
	// grant key, value: the approval id).
	kvApprovals = "lemon_approvals"
	kvGrants    = "lemon_grants"
)

var kvBucketOf = map[string]string{bucketNodes: kvNodes, bucketSessions: kvSessions, bucketPairings: kvPairings}

// kvEnvelope wraps a record with the name of the controller that wrote
// it, so a controller's watch skips its own writes (already applied).
type kvEnvelope struct {
	Origin string          `json:"o"`
	Value  json.RawMessage `json:"v"`
}

// kvBackend keeps the registry in JetStream KV (store.backend).
type kvBackend struct {
	origin string
	js     jetstream.JetStream
	nc     *nats.Conn
	kv     map[string]jetstream.KeyValue // store bucket name (and kvHolders) →

	mu sync.Mutex
	// flushed maps a node id to the digest of the snapshot fields its
	// last successful flush wrote (snapshotDigest); a flush skips records
	// that still match. See writeSnapshots and forget.
	flushed map[string][sha256.Size]byte
	// testHookUpdate, set only by tests before any use, runs before each
	// compare-and-swap of a flush; an error it returns fails that record.
	testHookUpdate func(id string) error
}

// kvOpTimeout bounds one KV operation (in a flush, one record's read and
// compare-and-swap).
const kvOpTimeout = 5 * time.Second

// kvFlushWorkers bounds the records a flush writes at once; kvFlushBudget
// bounds how long a flush keeps starting records (the rest wait for the
// next flush).
const (
	kvFlushWorkers = 16
	kvFlushBudget  = 30 * time.Second
)

// openKV creates (or opens) the buckets with replicas replicas.
func openKV(nc *nats.Conn, origin string, replicas int) (*kvBackend, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("controller: JetStream: %w", err)
	}
	b := &kvBackend{origin: origin, js: js, nc: nc, kv: map[string]jetstream.KeyValue{},
		flushed: map[string][sha256.Size]byte{}}
	names := map[string]string{bucketNodes: kvNodes, bucketSessions: kvSessions, bucketPairings: kvPairings, kvHolders: kvHolders,
		kvApprovals: kvApprovals, kvGrants: kvGrants}
	for local, name := range names {
		var kv jetstream.KeyValue
		// The JetStream meta leader may still be elected just after the
		// cluster starts: retry for up to 30 s.
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), kvOpTimeout)
			kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, History: 1, Replicas: replicas})
			cancel()
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			return nil, fmt.Errorf("controller: cannot open KV bucket %s: %w", name, err)
		}
		b.kv[local] = kv
	}
	return b, nil
}

func (b *kvBackend) wrap(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(kvEnvelope{Origin: b.origin, Value: raw})
}

func (b *kvBackend) apply(ops []op) error {
	ctx, cancel := context.WithTimeout(context.Background(), kvOpTimeout)
	defer cancel()
	for _, o := range ops {
		kv := b.kv[o.bucket]
		if o.bucket == bucketNodes {
			b.forget(o.key)
		}
		if o.value == nil {
			if err := kv.Delete(ctx, o.key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
				return err
			}
			continue
		}
		v, err := b.wrap(o.value)
		if err != nil {
			return err
		}
		if _, err := kv.Put(ctx, o.key, v); err != nil {
			return err
		}
	}
	return nil
}

// snapshotFields are the fields a flush merges into a stored node record;
// their digest is what kvBackend.flushed remembers.
type snapshotFields struct {
	Methods         map[string]int          `json:"m,omitempty"`
	ModuleSetDigest string                  `json:"d,omitempty"`
	MaxPayload      int                     `json:"p,omitempty"`
	Capabilities    []string                `json:"c,omitempty"`
	Client          *protocol.ConnectClient `json:"cl,omitempty"`
	Modules         []protocol.ModuleStatus `json:"mo,omitempty"`
	LastSeenAtMs    int64                   `json:"s,omitempty"`
}

func snapshotDigest(rec *nodeRecord) [sha256.Size]byte {
	raw, _ := json.Marshal(snapshotFields{rec.Methods, rec.ModuleSetDigest, rec.MaxPayload,
		rec.Capabilities, rec.Client, rec.Modules, rec.LastSeenAtMs})
	return sha256.Sum256(raw)
}

// forget drops the flushed digest of a node record, so the next flush
// writes it again: called when this controller puts or deletes the record
// and when the watch sees another controller write it (its stored
// advertise may no longer be ours).
func (b *kvBackend) forget(id string) {
	b.mu.Lock()
	delete(b.flushed, id)
	b.mu.Unlock()
}

// writeSnapshots merges the advertise and last-seen fields of each record
// into the stored one with a compare-and-swap on its revision, so a flush
// never undoes another controller's rename or re-pairing. Only records
// whose fields differ from the last successful flush of that key are
// written (kvBackend.flushed), by up to kvFlushWorkers at once, each with
// its own kvOpTimeout; once the flush has run kvFlushBudget, or the
// connection is down, no further record is started. The error counts the
// records not written; the registry marks the batch dirty again and the
// next flush writes just those (the others match their digest).
func (b *kvBackend) writeSnapshots(recs []nodeRecord) error {
	todo := make([]int, 0, len(recs))
	digests := make([][sha256.Size]byte, len(recs))
	b.mu.Lock()
	for i := range recs {
		digests[i] = snapshotDigest(&recs[i])
		if d, ok := b.flushed[recs[i].ID]; !ok || d != digests[i] {
			todo = append(todo, i)
		}
	}
	b.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	deadline := time.Now().Add(kvFlushBudget)
	var (
		mu       sync.Mutex
		failed   int
		firstErr error
		wg       sync.WaitGroup
	)
	work := make(chan int)
	for range min(kvFlushWorkers, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				written, err := b.writeSnapshot(&recs[i])
				mu.Lock()
				if err != nil {
					failed++
					if firstErr == nil {
						firstErr = err
					}
				}
				mu.Unlock()
				if err == nil && written {
					b.mu.Lock()
					b.flushed[recs[i].ID] = digests[i]
					b.mu.Unlock()
				}
			}
		}()
	}
	skipped := 0
	for n, i := range todo {
		if time.Now().After(deadline) || !b.nc.IsConnected() {
			skipped = len(todo) - n
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if failed+skipped == 0 {
		return nil
	}
	if firstErr == nil {
		firstErr = errors.New("flush budget spent or connection down")
	}
	return fmt.Errorf("controller: %d of %d node records not flushed: %w", failed+skipped, len(todo), firstErr)
}

// writeSnapshot merges one record with up to three compare-and-swap
// tries, under its own kvOpTimeout. written is false when there is no
// stored record (a flush never brings back a deleted one) or the stored
// one is undecodable; an error means it was not written.
func (b *kvBackend) writeSnapshot(rec *nodeRecord) (written bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), kvOpTimeout)
	defer cancel()
	kv := b.kv[bucketNodes]
	for try := 0; try < 3; try++ {
		ent, err := kv.Get(ctx, rec.ID)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		var env kvEnvelope
		var cur nodeRecord
		if json.Unmarshal(ent.Value(), &env) != nil || json.Unmarshal(env.Value, &cur) != nil {
			return false, nil
		}
		cur.Methods, cur.ModuleSetDigest, cur.MaxPayload = rec.Methods, rec.ModuleSetDigest, rec.MaxPayload
		cur.Capabilities, cur.Client, cur.Modules = rec.Capabilities, rec.Client, rec.Modules
		cur.LastSeenAtMs = max(cur.LastSeenAtMs, rec.LastSeenAtMs)
		v, err := b.wrap(cur)
		if err != nil {
			return false, err
		}
		if h := b.testHookUpdate; h != nil {
			if err := h(rec.ID); err != nil {
				return false, err
			}
		}
		if _, err = kv.Update(ctx, rec.ID, v, ent.Revision()); err == nil {
			return true, nil
		} else if ctx.Err() != nil {
			return false, err
		}
		// A revision conflict: another controller wrote it; read again.
	}
	return false, errors.New("compare-and-swap lost three times")
}

// load reads every record of a bucket (the watcher's initial values).
func (b *kvBackend) load(bucket string, fn func(key string, value []byte) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := b.kv[bucket].WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case ent, ok := <-w.Updates():
			if !ok {
				return errors.New("controller: KV watch ended")
			}
			if ent == nil {
				return nil
			}
			var env kvEnvelope
			if err := json.Unmarshal(ent.Value(), &env); err != nil {
				return fmt.Errorf("controller: corrupt record in KV bucket %s", bucket)
			}
			if err := fn(ent.Key(), env.Value); err != nil {
				return err
			}
		case <-ctx.Done():
			return errors.New("controller: KV load timed out")
		}
	}
}

func (b *kvBackend) open() bool { return b.nc.IsConnected() }

// close leaves the connection to its owner (the cluster engine).
func (b *kvBackend) close() error { return nil }
