package store

import (
	"context"
	"errors"
	"fmt"

	"lemon/hostcalls"
	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// DomainStoreUnavailable is the domain code of a failed durable store.
const DomainStoreUnavailable = "store_unavailable"

// DomainStoreFull is the domain code of a guest namespace at its key
// limit (durable: MaxKeys; volatile: its key or byte budget).
const DomainStoreFull = "store_full"

// Table returns the guest host calls of the store (docs/HOSTCALLS.md;
// argument and result types are lemon/hostcalls/contract's Store* types).
// Each call works on the calling module's own namespace (call.Module()),
// durable or, with volatile:true, volatile; there is no way to name
// another module's.
//
// Authority (docs/POLICY.md, "The module's own store"): a module's own
// namespace is its bookkeeping, not an effect a caller sees, so no store
// call needs a capability (hostcalls.CapNone) and none is an effect
// (audit class hostcalls.AuditBookkeeping): any method of the module may
// use them, a read-class one or one under a read_only workspace included,
// and they never mark a request mutationMayHaveApplied.
//
// Keys are 1–512 bytes of UTF-8 without NUL; values are any JSON value of
// at most 64 KiB; list and scan return at most 1000 keys (default 100) in
// byte order, scan at most MaxScanBytes of keys and values. Every durable
// write is one fsync'd transaction.
func (s *Store) Table() hostcalls.Table {
	none, bk := hostcalls.CapNone, hostcalls.AuditBookkeeping
	return hostcalls.Table{
		hostcalls.Define(contract.StoreGet, none, bk, s.hcGet, keyErrors...),
		hostcalls.Define(contract.StorePut, none, bk, s.hcPut, putErrors...),
		hostcalls.Define(contract.StoreCreate, none, bk, s.hcCreate,
			append(putErrors[:len(putErrors):len(putErrors)],
				hostcalls.Err(protocol.DomainError(protocol.CodeConflict, protocol.DomainAlreadyExists, ""), "the key exists"))...),
		hostcalls.Define(contract.StoreDelete, none, bk, s.hcDelete, keyErrors...),
		hostcalls.Define(contract.StoreCAS, none, bk, s.hcCAS,
			append(putErrors[:len(putErrors):len(putErrors)],
				hostcalls.Err(protocol.InvalidParams("delete", ""), "delete with a value or expiresAtMs"))...),
		hostcalls.Define(contract.StoreList, none, bk, s.hcList, rangeErrors...),
		hostcalls.Define(contract.StoreScan, none, bk, s.hcScan, rangeErrors...),
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
		hostcalls.Err(protocol.InvalidParams("expiresAtMs", ""), "expiresAtMs on the durable namespace, or not in the future"),
		hostcalls.Err(protocol.DomainError(protocol.CodeUnavailable, DomainStoreFull, ""),
			"a new key in a namespace at its key limit, or (volatile) past its byte budget"))
	rangeErrors = []hostcalls.ErrorSpec{
		hostcalls.Err(protocol.InvalidParams("limit", ""), "limit is not 0 or 1 to 1000"),
		hostcalls.Err(protocol.InvalidParams("prefix", ""), "prefix or after is longer than 512 bytes"),
		errUnavailable,
	}
)

func unavailable() *protocol.Error {
	return protocol.DomainError(protocol.CodeUnavailable, DomainStoreUnavailable, "durable store unavailable").WithRetry(false, false)
}

func storeFull(volatile bool, budget string) *protocol.Error {
	msg := "module store namespace is full"
	if volatile {
		msg = fmt.Sprintf("module volatile store namespace is full (%s budget)", budget)
	}
	return protocol.DomainError(protocol.CodeUnavailable, DomainStoreFull, msg).WithRetry(false, false)
}

// classify turns a store failure into a safe protocol error.
func classify(err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	if errors.Is(err, ErrInvalidName) {
		return protocol.Errorf(protocol.CodeInternal, "module has no store namespace")
	}
	return unavailable()
}

func checkKey(key string) *protocol.Error {
	if !validKey(key) {
		return protocol.InvalidParams("key", "key must be 1 to 512 bytes of UTF-8 without NUL")
	}
	return nil
}

func checkValue(v []byte) *protocol.Error {
	if len(v) == 0 {
		return protocol.InvalidParams("value", "value is required")
	}
	if len(v) > MaxValueBytes {
		return protocol.InvalidParams("value", "value exceeds 65536 bytes")
	}
	return nil
}

func (s *Store) checkExpiry(volatile bool, exp int64) *protocol.Error {
	if exp == 0 {
		return nil
	}
	if !volatile {
		return protocol.InvalidParams("expiresAtMs", "expiresAtMs applies only to the volatile namespace")
	}
	if exp <= s.now().UnixMilli() {
		return protocol.InvalidParams("expiresAtMs", "expiresAtMs must be in the future")
	}
	return nil
}

// write runs op on the durable or the volatile namespace of the calling
// module and turns a refusal for the key budget into store_full.
func (s *Store) write(call hostcalls.Call, volatile bool, op casOp, exp int64) (casResult, error) {
	if volatile {
		if !validName(call.Module()) {
			return casResult{}, classify(ErrInvalidName)
		}
		res, full := s.vol.write(call.Module(), op, exp)
		if res.full {
			return res, storeFull(true, full)
		}
		return res, nil
	}
	res, err := s.modWrite(call.Module(), op)
	if err != nil {
		return res, classify(err)
	}
	if res.full {
		return res, storeFull(false, "keys")
	}
	return res, nil
}

func (s *Store) hcGet(ctx context.Context, call hostcalls.Call, a contract.StoreKeyArgs) (contract.StoreGetResult, error) {
	if perr := checkKey(a.Key); perr != nil {
		return contract.StoreGetResult{}, perr
	}
	if a.Volatile {
		if !validName(call.Module()) {
			return contract.StoreGetResult{}, classify(ErrInvalidName)
		}
		e, ok := s.vol.get(call.Module(), a.Key)
		if !ok {
			return contract.StoreGetResult{}, nil
		}
		return contract.StoreGetResult{Found: true, Value: e.value, Revision: e.rev, ExpiresAtMs: e.exp}, nil
	}
	e, err := s.modGet(call.Module(), a.Key)
	if err != nil {
		return contract.StoreGetResult{}, classify(err)
	}
	if e.rev == 0 {
		return contract.StoreGetResult{}, nil
	}
	return contract.StoreGetResult{Found: true, Value: e.value, Revision: e.rev}, nil
}

func (s *Store) put(call hostcalls.Call, a contract.StorePutArgs, create bool) (contract.StoreWriteResult, error) {
	if perr := checkKey(a.Key); perr != nil {
		return contract.StoreWriteResult{}, perr
	}
	if perr := checkValue(a.Value); perr != nil {
		return contract.StoreWriteResult{}, perr
	}
	if perr := s.checkExpiry(a.Volatile, a.ExpiresAtMs); perr != nil {
		return contract.StoreWriteResult{}, perr
	}
	res, err := s.write(call, a.Volatile, casOp{key: a.Key, value: a.Value, check: create}, a.ExpiresAtMs)
	if err != nil {
		return contract.StoreWriteResult{}, err
	}
	if !res.swapped {
		return contract.StoreWriteResult{}, protocol.DomainError(protocol.CodeConflict, protocol.DomainAlreadyExists, "key already exists")
	}
	return contract.StoreWriteResult{Revision: res.rev}, nil
}

func (s *Store) hcPut(ctx context.Context, call hostcalls.Call, a contract.StorePutArgs) (contract.StoreWriteResult, error) {
	return s.put(call, a, false)
}

func (s *Store) hcCreate(ctx context.Context, call hostcalls.Call, a contract.StorePutArgs) (contract.StoreWriteResult, error) {
	return s.put(call, a, true)
}

func (s *Store) hcDelete(ctx context.Context, call hostcalls.Call, a contract.StoreKeyArgs) (contract.StoreDeleteResult, error) {
	if perr := checkKey(a.Key); perr != nil {
		return contract.StoreDeleteResult{}, perr
	}
	res, err := s.write(call, a.Volatile, casOp{key: a.Key}, 0)
	if err != nil {
		return contract.StoreDeleteResult{}, err
	}
	return contract.StoreDeleteResult{Deleted: res.existed}, nil
}

func (s *Store) hcCAS(ctx context.Context, call hostcalls.Call, a contract.StoreCASArgs) (contract.StoreCASResult, error) {
	if perr := checkKey(a.Key); perr != nil {
		return contract.StoreCASResult{}, perr
	}
	if a.Delete {
		if len(a.Value) != 0 || a.ExpiresAtMs != 0 {
			return contract.StoreCASResult{}, protocol.InvalidParams("delete", "a delete takes no value and no expiresAtMs")
		}
	} else {
		if perr := checkValue(a.Value); perr != nil {
			return contract.StoreCASResult{}, perr
		}
		if perr := s.checkExpiry(a.Volatile, a.ExpiresAtMs); perr != nil {
			return contract.StoreCASResult{}, perr
		}
	}
	op := casOp{key: a.Key, check: true, expected: a.Expected}
	if !a.Delete {
		op.value = a.Value
	}
	res, err := s.write(call, a.Volatile, op, a.ExpiresAtMs)
	if err != nil {
		return contract.StoreCASResult{}, err
	}
	return contract.StoreCASResult{Swapped: res.swapped, Revision: res.rev}, nil
}

func checkRange(prefix, after string, limit *int) *protocol.Error {
	if *limit == 0 {
		*limit = 100
	}
	if *limit < 1 || *limit > MaxListLimit {
		return protocol.InvalidParams("limit", "limit must be 1 to 1000")
	}
	if len(prefix) > MaxKeyBytes || len(after) > MaxKeyBytes {
		return protocol.InvalidParams("prefix", "prefix and after must be at most 512 bytes")
	}
	return nil
}

func (s *Store) scan(call hostcalls.Call, volatile bool, prefix, after string, lim scanLimits) (*scanned, error) {
	if volatile {
		if !validName(call.Module()) {
			return nil, classify(ErrInvalidName)
		}
		return s.vol.scan(call.Module(), prefix, after, lim), nil
	}
	sc, err := s.modScan(call.Module(), prefix, after, lim)
	if err != nil {
		return nil, classify(err)
	}
	return sc, nil
}

func (s *Store) hcList(ctx context.Context, call hostcalls.Call, a contract.StoreListArgs) (contract.StoreListResult, error) {
	if perr := checkRange(a.Prefix, a.After, &a.Limit); perr != nil {
		return contract.StoreListResult{}, perr
	}
	// Keys only: 1000 keys of 512 bytes stay within MaxScanBytes.
	sc, err := s.scan(call, a.Volatile, a.Prefix, a.After, scanLimits{limit: a.Limit, maxBytes: MaxScanBytes, keysOnly: true})
	if err != nil {
		return contract.StoreListResult{}, err
	}
	return contract.StoreListResult{Keys: sc.keys, More: sc.more}, nil
}

func (s *Store) hcScan(ctx context.Context, call hostcalls.Call, a contract.StoreScanArgs) (contract.StoreScanResult, error) {
	if perr := checkRange(a.Prefix, a.After, &a.Limit); perr != nil {
		return contract.StoreScanResult{}, perr
	}
	sc, err := s.scan(call, a.Volatile, a.Prefix, a.After, scanLimits{limit: a.Limit, maxBytes: MaxScanBytes})
	if err != nil {
		return contract.StoreScanResult{}, err
	}
	out := contract.StoreScanResult{Entries: make([]contract.StoreEntry, len(sc.keys)), More: sc.more}
	for i, k := range sc.keys {
		out.Entries[i] = contract.StoreEntry{Key: k, Value: sc.values[i], Revision: sc.revs[i], ExpiresAtMs: sc.exps[i]}
	}
	return out, nil
}
