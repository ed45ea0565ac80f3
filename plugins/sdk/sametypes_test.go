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
	_ func(string, bool) (contract.FSOpenResult, error)                            = fs.Open
	_ func(uint32, int64, int64) (contract.FSPReadResult, error)                   = fs.PRead
	_ func(string, int64, int64) (contract.FSReadResult, error)                    = fs.Read
	_ func(contract.FSWriteAtArgs) (contract.FSWriteAtResult, error)               = fs.WriteAt
	_ func(string) (contract.FSMkdirsResult, error)                                = fs.Mkdirs
	_ func(contract.FSRenameArgs) (contract.FSRenameResult, error)                 = fs.Rename
	_ func(contract.FSWalkArgs) (contract.FSWalkResult, error)                     = fs.Walk
	_ func(contract.FSRemoveArgs) (contract.FSRemoveResult, error)                 = fs.Remove
	_ func(string) (contract.StoreGetResult, error)                                = store.Get
	_ func(string) (contract.StoreDeleteResult, error)                             = store.Delete
	_ func(string, string, int) (contract.StoreListResult, error)                  = store.List
	_ func(string, uint32, *contract.VaultRecord) (contract.VaultSetResult, error) = vault.Set
	_ func(string, uint32, *contract.VaultRecord) error                            = vault.Put
	_ func(int) (contract.VaultListResult, error)                                  = vault.List
	_ func(int) (json.RawMessage, bool, error)                                     = vault.ListNamesJSON
	_ func(string) (contract.VaultDeleteResult, error)                             = vault.Delete
	_ func(string) (contract.VaultReceiptResult, error)                            = vault.Receipt
	_ func() (contract.SysinfoFigures, error)                                      = sysinfo.Snapshot
	_ func(contract.SpawnStartArgs) (contract.SpawnStartResult, error)             = spawn.Start
	_ func(string) (contract.SpawnWaitResult, error)                               = spawn.Wait
	_ func(string) (contract.SpawnSignalResult, error)                             = spawn.Signal
	_ func(string) (contract.SpawnReleaseResult, error)                            = spawn.Release
)

// The store wrappers (durable package-level functions and Namespace
// methods).
var (
	_ func(string, json.RawMessage) (uint64, error)                                           = store.Put
	_ func(string, json.RawMessage) (uint64, error)                                           = store.Create
	_ func(string, uint64, json.RawMessage) (contract.StoreCASResult, error)                  = store.CAS
	_ func(string, uint64) (contract.StoreCASResult, error)                                   = store.CASDelete
	_ func(string, string, int) (contract.StoreScanResult, error)                             = store.Scan
	_ func(string) (contract.StoreGetResult, error)                                           = store.Volatile.Get
	_ func(string, json.RawMessage, ...store.Option) (uint64, error)                          = store.Volatile.Put
	_ func(string, json.RawMessage, ...store.Option) (uint64, error)                          = store.Volatile.Create
	_ func(string) (contract.StoreDeleteResult, error)                                        = store.Volatile.Delete
	_ func(string, uint64, json.RawMessage, ...store.Option) (contract.StoreCASResult, error) = store.Volatile.CAS
	_ func(string, uint64) (contract.StoreCASResult, error)                                   = store.Volatile.CASDelete
	_ func(string, string, int) (contract.StoreListResult, error)                             = store.Volatile.List
	_ func(string, string, int) (contract.StoreScanResult, error)                             = store.Volatile.Scan
)
