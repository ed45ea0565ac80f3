//go:build !wasip1

package sdk_test

import (
	"encoding/json"

	"lemon/hostcalls/contract"
	"lemon/plugins/sdk/fs"
	"lemon/plugins/sdk/spawn"
	"lemon/plugins/sdk/store"
	"lemon/plugins/sdk/sysinfo"
	"lemon/plugins/sdk/vault"
)

// Compile-time proof that the guest wrappers send and read exactly the
// contract types. The host side is proved the same way by
// hostcalls.Define, whose handler type is inferred from the same
// contract.Call (a handler of another type does not compile), and at run
// time by hostcalls/families TestTablesMatchContract.
var (
	_ func(string, bool) (contract.FSOpenResult, error)                = fs.Open
	_ func(uint32, int64, int64) (contract.FSPReadResult, error)       = fs.PRead
	_ func(string, int64, int64) (contract.FSReadResult, error)        = fs.Read
	_ func(contract.FSWriteArgs) (contract.FSWriteResult, error)       = fs.Write
	_ func(string) (contract.FSMkdirResult, error)                     = fs.Mkdir
	_ func(string, string, int64, bool) (contract.FSMoveResult, error) = fs.Move
	_ func(string, bool) (contract.FSDeletePreviewResult, error)       = fs.DeletePreview
	_ func(string, bool) (contract.PayloadResult, error)               = fs.DeletePreviewPayload
	_ func(string, string, string) (contract.FSDeleteResult, error)    = fs.Delete
	_ func(string) (contract.StoreGetResult, error)                    = store.Get
	_ func(string, json.RawMessage) error                              = store.Put
	_ func(string, json.RawMessage) error                              = store.Create
	_ func(string) (contract.StoreDeleteResult, error)                 = store.Delete
	_ func(string, string, int) (contract.StoreListResult, error)      = store.List
	_ func(contract.SpawnRunArgs) (contract.SpawnRunResult, error)     = spawn.Run
	_ func(string) (contract.SpawnReceiptResult, error)                = spawn.Result
	_ func(string) (contract.SpawnReceiptResult, error)                = spawn.Get
	_ func(string) (contract.SpawnReceiptResult, error)                = spawn.Cancel
	_ func(string, uint32, *string) (contract.VaultSetResult, error)   = vault.Set
	_ func() (contract.VaultListResult, error)                         = vault.List
	_ func() (contract.PayloadResult, error)                           = vault.ListPayload
	_ func(string) (contract.VaultDeleteResult, error)                 = vault.Delete
	_ func(string) (contract.VaultReceiptResult, error)                = vault.Receipt
	_ func() (contract.SysinfoFigures, error)                          = sysinfo.Snapshot
)
