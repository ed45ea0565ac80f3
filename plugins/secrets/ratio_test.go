//go:build !wasip1

package secrets_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"lemon/host/hosttest"
	"lemon/hostcalls/vault"
	"lemon/protocol"
)

// BenchmarkRatioSecretsSet: node.secrets.set with an operationId (a new
// name and id each time, a 32-byte value) through the wasm module and the
// gate, against native Go doing the same work on a vault of its own:
// strict params decode and validation, name trimming, the receipt key,
// then one seal-and-put carrying the receipt record (one fsync'd bbolt
// transaction). Bound: ratio ≤ 1.3 (docs/BENCHMARKS.md, "Module ABI").
//
//	go test -run '^$' -bench BenchmarkRatioSecretsSet -benchtime 300x ./plugins/secrets/
func BenchmarkRatioSecretsSet(b *testing.B) {
	f := newFixture(b)
	keyFile := filepath.Join(f.root, "native.key")
	if err := vault.GenerateKeyFile(keyFile); err != nil {
		b.Fatal(err)
	}
	nv, err := vault.New(vault.Config{Dir: filepath.Join(f.root, "native"), KeyFile: keyFile})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nv.Close() })
	ctx := context.Background()
	const nodeID = "node-id"
	args := func(i int) json.RawMessage {
		return json.RawMessage(`{"nodeId":"node-id","name":" bench/` + itoa(i) + ` ","value":"0123456789abcdef0123456789abcdef","operationId":"op-` + itoa(i) + `"}`)
	}
	mi, ni := 0, 0
	module := func() error {
		mi++
		_, perr := f.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "i", NodeID: nodeID, SessionGeneration: 1,
			Method: protocol.MethodSecretsSet, Args: args(mi)})
		if perr != nil {
			return perr
		}
		return nil
	}
	native := func() error {
		ni++
		p, perr := protocol.DecodeSecretsSet(args(ni))
		if perr != nil {
			return perr
		}
		name, perr := protocol.CheckSecretName(p.Name)
		if perr != nil {
			return perr
		}
		value := []byte(*p.Value)
		rec := &vault.Record{Key: "op/" + nodeID + "/" + *p.OperationID, Value: "applied", MaxPerName: protocol.SecretReceiptsPerName}
		if _, perr := nv.Put(vault.PutRequest{Family: "secrets", Name: name, Value: value, Record: rec}); perr != nil {
			return perr
		}
		t := true
		_, err := json.Marshal(protocol.SecretsSetResult{Name: name, Set: true, OperationID: *p.OperationID,
			Status: protocol.SecretStatusApplied, CurrentBindingMatches: &t})
		return err
	}
	hosttest.SideBySide(b, module, native)
}
