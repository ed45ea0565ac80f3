package store

import (
	"context"
	"errors"

	"lemon/hostcalls"
	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// DomainStoreUnavailable is the domain code of a failed durable store.
const DomainStoreUnavailable = "store_unavailable"

// DomainStoreFull is the domain code of a guest namespace at MaxKeys.
const DomainStoreFull = "store_full"

// Table returns the guest host calls of the store (docs/HOSTCALLS.md;
// argument and result types are lemon/hostcalls/contract's Store* types).
// Each call works on the calling module's own namespace (call.Module());
// there is no way to name another one. Reads need the read capability,
// writes the write capability.
//
// Keys are 1–512 bytes of UTF-8 without NUL; values are any JSON value of
// at most 64 KiB; list returns at most 1000 keys (default 100) in byte
// order. Every write is one fsync'd transaction.
func (s *Store) Table() hostcalls.Table {
	return hostcalls.Table{
		hostcalls.Define(contract.StoreGet, hostcalls.CapRead, hostcalls.AuditRead, s.hcGet, keyErrors...),
		hostcalls.Define(contract.StorePut, hostcalls.CapWrite, hostcalls.AuditMutation, s.hcPut, putErrors...),
		hostcalls.Define(contract.StoreCreate, hostcalls.CapWrite, hostcalls.AuditMutation, s.hcCreate,
			append(putErrors[:len(putErrors):len(putErrors)],
				hostcalls.Err(protocol.DomainError(protocol.CodeConflict, protocol.DomainAlreadyExists, ""), "the key exists"))...),
		hostcalls.Define(contract.StoreDelete, hostcalls.CapWrite, hostcalls.AuditMutation, s.hcDelete, keyErrors...),
		hostcalls.Define(contract.StoreList, hostcalls.CapRead, hostcalls.AuditRead, s.hcList,
			hostcalls.Err(protocol.InvalidParams("limit", ""), "limit is not 0 or 1 to 1000"),
			hostcalls.Err(protocol.InvalidParams("prefix", ""), "prefix or after is longer than 512 bytes"),
			errUnavailable),
	}
}

// The errors of the store host calls, as data for docs/HOSTCALLS.md.
var (
	errUnavailable = hostcalls.Err(unavailable(), "the durable store failed")
	keyErrors      = []hostcalls.ErrorSpec{
		hostcalls.Err(protocol.InvalidParams("key", ""), "key is empty, longer than 512 bytes, not UTF-8 or has NUL"),
		errUnavailable,
	}
	putErrors = append(keyErrors[:len(keyErrors):len(keyErrors)],
		hostcalls.Err(protocol.InvalidParams("value", ""), "value is missing or longer than 65536 bytes"),
		hostcalls.Err(protocol.DomainError(protocol.CodeUnavailable, DomainStoreFull, ""), "a new key in a namespace at its key limit"))
)

func unavailable() *protocol.Error {
	return protocol.DomainError(protocol.CodeUnavailable, DomainStoreUnavailable, "durable store unavailable").WithRetry(false, false)
}

// classify turns a store failure into a safe protocol error.
func classify(err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	return unavailable()
}

func (s *Store) ns(call hostcalls.Call) (*Namespace, *protocol.Error) {
	n, err := s.moduleNamespace(call.Module())
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "module has no store namespace")
	}
	return n, nil
}

func checkKey(key string) *protocol.Error {
	if !validKey(key) {
		return protocol.InvalidParams("key", "key must be 1 to 512 bytes of UTF-8 without NUL")
	}
	return nil
}

func checkPut(a contract.StorePutArgs) *protocol.Error {
	if !validKey(a.Key) {
		return protocol.InvalidParams("key", "key must be 1 to 512 bytes of UTF-8 without NUL")
	}
	if len(a.Value) == 0 {
		return protocol.InvalidParams("value", "value is required")
	}
	if len(a.Value) > MaxValueBytes {
		return protocol.InvalidParams("value", "value exceeds 65536 bytes")
	}
	return nil
}

func (s *Store) hcGet(ctx context.Context, call hostcalls.Call, a contract.StoreKeyArgs) (contract.StoreGetResult, error) {
	if perr := checkKey(a.Key); perr != nil {
		return contract.StoreGetResult{}, perr
	}
	n, perr := s.ns(call)
	if perr != nil {
		return contract.StoreGetResult{}, perr
	}
	var v []byte
	var found bool
	if err := n.View(func(tx *Tx) error { v, found = tx.Get(a.Key); return nil }); err != nil {
		return contract.StoreGetResult{}, classify(err)
	}
	if !found {
		return contract.StoreGetResult{Found: false, Value: nil}, nil
	}
	return contract.StoreGetResult{Found: true, Value: v}, nil
}

func (s *Store) put(call hostcalls.Call, a contract.StorePutArgs, create bool) (contract.Empty, error) {
	if perr := checkPut(a); perr != nil {
		return contract.Empty{}, perr
	}
	n, perr := s.ns(call)
	if perr != nil {
		return contract.Empty{}, perr
	}
	err := n.Update(func(tx *Tx) error {
		_, exists := tx.Get(a.Key)
		if exists && create {
			return protocol.DomainError(protocol.CodeConflict, protocol.DomainAlreadyExists, "key already exists")
		}
		if !exists && tx.Count("") >= s.maxKeys {
			return protocol.DomainError(protocol.CodeUnavailable, DomainStoreFull, "module store namespace is full").WithRetry(false, false)
		}
		return tx.Put(a.Key, a.Value)
	})
	if err != nil {
		return contract.Empty{}, classify(err)
	}
	return contract.Empty{}, nil
}

func (s *Store) hcPut(ctx context.Context, call hostcalls.Call, a contract.StorePutArgs) (contract.Empty, error) {
	return s.put(call, a, false)
}

func (s *Store) hcCreate(ctx context.Context, call hostcalls.Call, a contract.StorePutArgs) (contract.Empty, error) {
	return s.put(call, a, true)
}

func (s *Store) hcDelete(ctx context.Context, call hostcalls.Call, a contract.StoreKeyArgs) (contract.StoreDeleteResult, error) {
	if perr := checkKey(a.Key); perr != nil {
		return contract.StoreDeleteResult{}, perr
	}
	n, perr := s.ns(call)
	if perr != nil {
		return contract.StoreDeleteResult{}, perr
	}
	var existed bool
	err := n.Update(func(tx *Tx) error {
		_, existed = tx.Get(a.Key)
		if !existed {
			return nil
		}
		return tx.Delete(a.Key)
	})
	if err != nil {
		return contract.StoreDeleteResult{}, classify(err)
	}
	return contract.StoreDeleteResult{Deleted: existed}, nil
}

func (s *Store) hcList(ctx context.Context, call hostcalls.Call, a contract.StoreListArgs) (contract.StoreListResult, error) {
	if a.Limit == 0 {
		a.Limit = 100
	}
	if a.Limit < 1 || a.Limit > MaxListLimit {
		return contract.StoreListResult{}, protocol.InvalidParams("limit", "limit must be 1 to 1000")
	}
	if len(a.Prefix) > MaxKeyBytes || len(a.After) > MaxKeyBytes {
		return contract.StoreListResult{}, protocol.InvalidParams("prefix", "prefix and after must be at most 512 bytes")
	}
	n, perr := s.ns(call)
	if perr != nil {
		return contract.StoreListResult{}, perr
	}
	keys := []string{}
	more := false
	errStop := errors.New("stop")
	err := n.View(func(tx *Tx) error {
		err := tx.ForEach(a.Prefix, a.After, func(k string, _ []byte) error {
			if len(keys) == a.Limit {
				more = true
				return errStop
			}
			keys = append(keys, k)
			return nil
		})
		if errors.Is(err, errStop) {
			return nil
		}
		return err
	})
	if err != nil {
		return contract.StoreListResult{}, classify(err)
	}
	return contract.StoreListResult{Keys: keys, More: more}, nil
}
