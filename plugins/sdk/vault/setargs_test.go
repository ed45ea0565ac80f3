package vault_test

import (
	"testing"

	"lemon/host/abi/wire"
	"lemon/hostcalls/contract"
	"lemon/plugins/sdk/vault"
)

// TestAppendSetArgsIsCodec: Put's hand-written args are exactly what the
// SDK codec writes for contract.VaultSetArgs: with and without a record,
// maxPerName 0 (omitted) and set, escapes, the largest blob id.
func TestAppendSetArgsIsCodec(t *testing.T) {
	for _, c := range []struct {
		name string
		blob uint32
		rec  *contract.VaultRecord
	}{
		{"db/password", 1, nil},
		{"db/password", 7, &contract.VaultRecord{Key: "op/n/op-1", Value: "applied", MaxPerName: 128}},
		{"<a>&\u2028\"\\\x01é", 1<<32 - 1, &contract.VaultRecord{Key: "k\"", Value: "", MaxPerName: 0}},
		{"x", 0, &contract.VaultRecord{Key: "k", Value: "v", MaxPerName: -3}},
	} {
		blob := c.blob
		want, err := wire.Marshal(contract.VaultSetArgs{Name: c.name, ValueBlob: &blob, Record: c.rec})
		if err != nil {
			t.Fatal(err)
		}
		if got := vault.AppendSetArgs(nil, c.name, c.blob, c.rec); string(got) != string(want) {
			t.Errorf("AppendSetArgs(%q, %d, %+v)\n got %s\nwant %s", c.name, c.blob, c.rec, got, want)
		}
	}
}
