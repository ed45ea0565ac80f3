package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
}

// kvOpTimeout bounds one KV operation.
const kvOpTimeout = 5 * time.Second

// openKV creates (or opens) the buckets with replicas replicas.
func openKV(nc *nats.Conn, origin string, replicas int) (*kvBackend, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("controller: JetStream: %w", err)
	}
	b := &kvBackend{origin: origin, js: js, nc: nc, kv: map[string]jetstream.KeyValue{}}
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

// writeSnapshots merges the advertise and last-seen fields of each record
// into the stored one with a compare-and-swap on its revision, so a flush
// never undoes another controller's rename or re-pairing.
func (b *kvBackend) writeSnapshots(recs []nodeRecord) error {
	ctx, cancel := context.WithTimeout(context.Background(), kvOpTimeout)
	defer cancel()
	kv := b.kv[bucketNodes]
	for _, rec := range recs {
		for try := 0; try < 3; try++ {
			ent, err := kv.Get(ctx, rec.ID)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				break
			}
			if err != nil {
				return err
			}
			var env kvEnvelope
			var cur nodeRecord
			if json.Unmarshal(ent.Value(), &env) != nil || json.Unmarshal(env.Value, &cur) != nil {
				break
			}
			cur.Methods, cur.ModuleSetDigest, cur.MaxPayload = rec.Methods, rec.ModuleSetDigest, rec.MaxPayload
			cur.Capabilities, cur.Client, cur.Modules = rec.Capabilities, rec.Client, rec.Modules
			cur.LastSeenAtMs = max(cur.LastSeenAtMs, rec.LastSeenAtMs)
			v, err := b.wrap(cur)
			if err != nil {
				return err
			}
			if _, err = kv.Update(ctx, rec.ID, v, ent.Revision()); err == nil {
				break
			}
		}
	}
	return nil
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
