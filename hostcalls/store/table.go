package store

import (
	"context"
	"encoding/json"
	"errors"

	"lemon/hostcalls"
	"lemon/protocol"
)

// DomainStoreUnavailable is the domain code of a failed durable store.
const DomainStoreUnavailable = "store_unavailable"

// DomainStoreFull is the domain code of a guest namespace at MaxKeys.
const DomainStoreFull = "store_full"

// Table returns the guest host calls of the store. Each call works on the
// calling module's own namespace (call.Module()); there is no way to name
// another one. Reads need the read capability, writes the write capability.
//
//	store.get    {key}                  -> {"found":bool,"value":<json>|null}
//	store.put    {key,value}            -> {}
//	store.create {key,value}            -> {} | CONFLICT already_exists
//	store.delete {key}                  -> {"deleted":bool}
//	store.list   {prefix,after?,limit?} -> {"keys":[...],"more":bool}
//
// Keys are 1–512 bytes of UTF-8 without NUL; values are any JSON value of
// at most 64 KiB; list returns at most 1000 keys (default 100) in byte
// order. Every write is one fsync'd transaction.
func (s *Store) Table() hostcalls.Table {
	return hostcalls.Table{
		{Name: "store.get", Params: []string{"key"}, Capability: hostcalls.CapRead, Audit: hostcalls.AuditRead, Func: s.hcGet},
		{Name: "store.put", Params: []string{"key", "value"}, Capability: hostcalls.CapWrite, Audit: hostcalls.AuditMutation, Func: s.hcPut},
		{Name: "store.create", Params: []string{"key", "value"}, Capability: hostcalls.CapWrite, Audit: hostcalls.AuditMutation, Func: s.hcCreate},
		{Name: "store.delete", Params: []string{"key"}, Capability: hostcalls.CapWrite, Audit: hostcalls.AuditMutation, Func: s.hcDelete},
		{Name: "store.list", Params: []string{"prefix", "after", "limit"}, Capability: hostcalls.CapRead, Audit: hostcalls.AuditRead, Func: s.hcList},
	}
}

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

type keyArgs struct {
	Key string `json:"key"`
}

type putArgs struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

type listArgs struct {
	Prefix string `json:"prefix"`
	After  string `json:"after"`
	Limit  int    `json:"limit"`
}

func (s *Store) ns(call hostcalls.Call) (*Namespace, *protocol.Error) {
	n, err := s.moduleNamespace(call.Module())
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "module has no store namespace")
	}
	return n, nil
}

func decodeKey(args []byte) (string, *protocol.Error) {
	var a keyArgs
	if err := protocol.DecodeParams(args, &a); err != nil {
		return "", err
	}
	if !validKey(a.Key) {
		return "", protocol.InvalidParams("key", "key must be 1 to 512 bytes of UTF-8 without NUL")
	}
	return a.Key, nil
}

func decodePut(args []byte) (putArgs, *protocol.Error) {
	var a putArgs
	if err := protocol.DecodeParams(args, &a); err != nil {
		return a, err
	}
	if !validKey(a.Key) {
		return a, protocol.InvalidParams("key", "key must be 1 to 512 bytes of UTF-8 without NUL")
	}
	if len(a.Value) == 0 {
		return a, protocol.InvalidParams("value", "value is required")
	}
	if len(a.Value) > MaxValueBytes {
		return a, protocol.InvalidParams("value", "value exceeds 65536 bytes")
	}
	return a, nil
}

func (s *Store) hcGet(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	key, perr := decodeKey(args)
	if perr != nil {
		return nil, perr
	}
	n, perr := s.ns(call)
	if perr != nil {
		return nil, perr
	}
	var v []byte
	var found bool
	if err := n.View(func(tx *Tx) error { v, found = tx.Get(key); return nil }); err != nil {
		return nil, classify(err)
	}
	if !found {
		return []byte(`{"found":false,"value":null}`), nil
	}
	return json.Marshal(struct {
		Found bool            `json:"found"`
		Value json.RawMessage `json:"value"`
	}{true, v})
}

func (s *Store) put(call hostcalls.Call, args []byte, create bool) ([]byte, error) {
	a, perr := decodePut(args)
	if perr != nil {
		return nil, perr
	}
	n, perr := s.ns(call)
	if perr != nil {
		return nil, perr
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
		return nil, classify(err)
	}
	return []byte(`{}`), nil
}

func (s *Store) hcPut(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	return s.put(call, args, false)
}

func (s *Store) hcCreate(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	return s.put(call, args, true)
}

func (s *Store) hcDelete(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	key, perr := decodeKey(args)
	if perr != nil {
		return nil, perr
	}
	n, perr := s.ns(call)
	if perr != nil {
		return nil, perr
	}
	var existed bool
	err := n.Update(func(tx *Tx) error {
		_, existed = tx.Get(key)
		if !existed {
			return nil
		}
		return tx.Delete(key)
	})
	if err != nil {
		return nil, classify(err)
	}
	if existed {
		return []byte(`{"deleted":true}`), nil
	}
	return []byte(`{"deleted":false}`), nil
}

func (s *Store) hcList(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a listArgs
	if err := protocol.DecodeParams(args, &a); err != nil {
		return nil, err
	}
	if a.Limit == 0 {
		a.Limit = 100
	}
	if a.Limit < 1 || a.Limit > MaxListLimit {
		return nil, protocol.InvalidParams("limit", "limit must be 1 to 1000")
	}
	if len(a.Prefix) > MaxKeyBytes || len(a.After) > MaxKeyBytes {
		return nil, protocol.InvalidParams("prefix", "prefix and after must be at most 512 bytes")
	}
	n, perr := s.ns(call)
	if perr != nil {
		return nil, perr
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
		return nil, classify(err)
	}
	return json.Marshal(struct {
		Keys []string `json:"keys"`
		More bool     `json:"more"`
	}{keys, more})
}
