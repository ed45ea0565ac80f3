package vault

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lemon/hostcalls"
	"lemon/protocol"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// writeKey writes a fresh 0600 key file in dir and returns its path.
func writeKey(t testing.TB, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := GenerateKeyFile(p); err != nil {
		t.Fatal(err)
	}
	return p
}

type fixture struct {
	dir, keyFile string
	clock        *clock
	v            *Vault
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	root := t.TempDir()
	f := &fixture{dir: filepath.Join(root, "state"), keyFile: writeKey(t, root, "master.key"),
		clock: &clock{t: time.Unix(1_700_000_000, 0)}}
	f.open(t)
	return f
}

func (f *fixture) open(t testing.TB) {
	t.Helper()
	v, err := New(Config{Dir: f.dir, KeyFile: f.keyFile, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f.v = v
	t.Cleanup(func() { v.Close() })
}

func (f *fixture) reopen(t testing.TB) {
	t.Helper()
	if err := f.v.Close(); err != nil {
		t.Fatal(err)
	}
	f.open(t)
}

func sp(s string) *string { return &s }

// modReq is a node.secrets.set as the secrets module (plugins/secrets)
// turns it into a put: the name trimmed, and with an operation id the
// receipt record "op/<node>/<op>" = "applied", at most 128 per name. The
// module's own tests check the method; these check the primitive under
// the module's use of it.
type modReq struct {
	NodeID      string
	Name        string
	Value       []byte
	OperationID *string
	ExpiresAt   time.Time
}

func modSet(v *Vault, r modReq) (PutResult, *protocol.Error) {
	name := r.Name
	if stored, perr := protocol.CheckSecretName(name); perr == nil {
		name = stored
	}
	req := PutRequest{Family: LegacyReceiptFamily, Name: name, Value: r.Value, ExpiresAt: r.ExpiresAt}
	if r.OperationID != nil {
		req.Record = &Record{Key: LegacyReceiptKey(r.NodeID, *r.OperationID), Value: LegacyReceiptValue,
			MaxPerName: protocol.SecretReceiptsPerName}
	}
	return v.Put(req)
}

func mustSet(t testing.TB, v *Vault, node, name, value string, op *string) PutResult {
	t.Helper()
	res, err := modSet(v, modReq{NodeID: node, Name: name, Value: []byte(value), OperationID: op})
	if err != nil {
		t.Fatalf("set: %v", err)
	}
	return res
}

func mustResolve(t testing.TB, v *Vault, name string) string {
	t.Helper()
	b, err := v.Resolve(name)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	return string(b)
}

// mustReceipt answers node.secrets.receipt as the secrets module does
// from the record and its name's state.
func mustReceipt(t testing.TB, v *Vault, node, op string) protocol.SecretsReceiptResult {
	t.Helper()
	st, err := v.Record(LegacyReceiptFamily, LegacyReceiptKey(node, op))
	if err != nil {
		t.Fatalf("receipt: %v", err)
	}
	r := protocol.SecretsReceiptResult{NodeID: node, OperationID: op, Status: protocol.SecretStatusNotFound}
	if st.Found {
		if st.Value != LegacyReceiptValue {
			t.Fatalf("record value %q", st.Value)
		}
		name := st.Name
		r.Status, r.Name = protocol.SecretStatusApplied, &name
		r.CurrentBindingMatches = st.Live && st.Revision == st.CurrentRevision
	}
	return r
}

func wantDomain(t testing.TB, err *protocol.Error, code, domain string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s/%s", code, domain)
	}
	if err.Code != code || err.DomainCode() != domain {
		t.Fatalf("error = %v, want %s/%s", err, code, domain)
	}
}

func wantField(t testing.TB, err *protocol.Error, field string) {
	t.Helper()
	if err == nil || err.Code != protocol.CodeInvalidParams || err.Details == nil || err.Details.Field != field {
		t.Fatalf("error = %+v, want INVALID_PARAMS on %s", err, field)
	}
}

func TestSetReplaceResolveList(t *testing.T) {
	f := newFixture(t)
	res := mustSet(t, f.v, "n1", "integration/token", "one", nil)
	if res != (PutResult{Revision: 1, Written: true}) {
		t.Fatalf("plain put = %+v", res)
	}
	// The vault takes names in stored form only: trimming is the module's.
	_, err := f.v.Put(PutRequest{Name: "  integration/token ", Value: []byte("x")})
	wantField(t, err, "name")
	mustSet(t, f.v, "n1", "integration/token", "two", nil)
	if got := mustResolve(t, f.v, "integration/token"); got != "two" {
		t.Fatalf("resolve after replace = %q", got)
	}
	l, _ := f.v.List(500)
	if strings.Join(l.Names, ",") != "integration/token" || l.More {
		t.Fatalf("list = %+v", l)
	}
	f.reopen(t)
	if got := mustResolve(t, f.v, " integration/token"); got != "two" {
		t.Fatalf("resolve after reopen = %q", got)
	}
	if f.v.Writes() != 0 {
		t.Fatalf("writes after reopen = %d", f.v.Writes())
	}
}

func TestNameAndValueLimits(t *testing.T) {
	f := newFixture(t)
	ok := []string{strings.Repeat("n", 256), " " + strings.Repeat("p", 254) + " ", "é"}
	for _, n := range ok {
		mustSet(t, f.v, "n1", n, "v", nil)
	}
	bad := []string{"", "   ", strings.Repeat("n", 257), "a\x00b", "a\xffb", " " + strings.Repeat("p", 255) + " "}
	for _, n := range bad {
		_, err := modSet(f.v, modReq{NodeID: "n1", Name: n, Value: []byte("v")})
		wantField(t, err, "name")
		_, err = f.v.Delete(n)
		wantField(t, err, "name")
	}
	mustSet(t, f.v, "n1", "big", strings.Repeat("x", 1<<20), nil)
	if got := mustResolve(t, f.v, "big"); len(got) != 1<<20 {
		t.Fatalf("1 MiB value resolved to %d bytes", len(got))
	}
	_, err := modSet(f.v, modReq{NodeID: "n1", Name: "big", Value: bytes.Repeat([]byte("x"), 1<<20+1)})
	wantField(t, err, "value")
	mustSet(t, f.v, "n1", "empty", "", nil)
	if got := mustResolve(t, f.v, "empty"); got != "" {
		t.Fatalf("empty value = %q", got)
	}
	// Record bounds: key 1 to 512 bytes, value at most 1024, maxPerName 0 to 1024.
	for _, r := range []Record{{Key: ""}, {Key: strings.Repeat("k", 513)}, {Key: "a\x00"}, {Key: "k", Value: strings.Repeat("v", 1025)},
		{Key: "k", MaxPerName: -1}, {Key: "k", MaxPerName: 1025}} {
		_, err := f.v.Put(PutRequest{Family: "secrets", Name: "x", Value: []byte("v"), Record: &r})
		wantField(t, err, "record")
	}
	writes := f.v.Writes()
	for i, r := range []Record{{Key: strings.Repeat("k", 512), Value: strings.Repeat("v", 1024), MaxPerName: 1024}, {Key: "k", MaxPerName: 1}} {
		if _, err := f.v.Put(PutRequest{Family: "secrets", Name: "x" + itoa(i), Value: []byte("v"), Record: &r}); err != nil {
			t.Fatal(err)
		}
	}
	// maxPerName 1 on a name holding 1 record: the next new record is refused.
	_, err = f.v.Put(PutRequest{Family: "secrets", Name: "x1", Value: []byte("v"), Record: &Record{Key: "k2", MaxPerName: 1}})
	wantDomain(t, err, protocol.CodeConflict, protocol.DomainSecretReceiptCapacity)
	if f.v.Writes() != writes+2 {
		t.Fatalf("writes = %d, want %d", f.v.Writes(), writes+2)
	}
}

func TestDeleteIdempotent(t *testing.T) {
	f := newFixture(t)
	deleted, err := f.v.Delete("missing")
	if err != nil || deleted {
		t.Fatalf("delete missing = %v, %v", deleted, err)
	}
	if f.v.Writes() != 0 {
		t.Fatal("deleting a missing name wrote")
	}
	mustSet(t, f.v, "n1", "a", "v", nil)
	if deleted, err := f.v.Delete("a"); err != nil || !deleted {
		t.Fatal(deleted, err)
	}
	if deleted, err := f.v.Delete("a"); err != nil || deleted {
		t.Fatal(deleted, err)
	}
	if f.v.Writes() != 2 {
		t.Fatalf("writes = %d, want 2 (set, first delete)", f.v.Writes())
	}
	_, rerr := f.v.Resolve("a")
	wantDomain(t, rerr, protocol.CodeNotFound, protocol.DomainNotFound)
	s, _ := f.v.Stats()
	if s != (Stats{}) {
		t.Fatalf("a deleted name without receipts left metadata: %+v", s)
	}
}

func TestListSortedBoundedExcludesExpiredAndDeleted(t *testing.T) {
	f := newFixture(t)
	for i := 499; i >= 0; i-- {
		mustSet(t, f.v, "n1", "s"+pad(i), "v", nil)
	}
	l, _ := f.v.List(500)
	if len(l.Names) != 500 || l.More {
		t.Fatalf("500 names: len=%d truncated=%v", len(l.Names), l.More)
	}
	for i, n := range l.Names {
		if n != "s"+pad(i) {
			t.Fatalf("names[%d] = %q", i, n)
		}
	}
	mustSet(t, f.v, "n1", "A-first", "v", nil)
	l, _ = f.v.List(500)
	if len(l.Names) != 500 || !l.More || l.Names[0] != "A-first" || l.Names[499] != "s"+pad(498) {
		t.Fatalf("501 names: len=%d truncated=%v first=%q last=%q", len(l.Names), l.More, l.Names[0], l.Names[499])
	}
	// Expiry and deletion both bring it back to 500, untruncated.
	if _, err := modSet(f.v, modReq{NodeID: "n1", Name: "s" + pad(10), Value: []byte("v"),
		ExpiresAt: f.clock.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	l, _ = f.v.List(500)
	if !l.More {
		t.Fatal("not yet expired, list should still be truncated")
	}
	f.clock.Advance(time.Minute)
	l, _ = f.v.List(500)
	if len(l.Names) != 500 || l.More || contains(l.Names, "s"+pad(10)) {
		t.Fatalf("after expiry: len=%d truncated=%v", len(l.Names), l.More)
	}
	_, rerr := f.v.Resolve("s" + pad(10))
	wantDomain(t, rerr, protocol.CodeNotFound, protocol.DomainNotFound)
	f.v.Delete("A-first")
	l, _ = f.v.List(500)
	if len(l.Names) != 499 || contains(l.Names, "A-first") {
		t.Fatalf("after delete: len=%d", len(l.Names))
	}
}

// TestListLimit: limit 1 to 1000 passes (0 and 1001 are INVALID_PARAMS
// on limit); the first limit names in byte order come back, with more
// exactly when names are left out.
func TestListLimit(t *testing.T) {
	f := newFixture(t)
	for _, n := range []string{"b", "a", "B"} {
		mustSet(t, f.v, "n1", n, "v", nil)
	}
	for _, tc := range []struct {
		limit int
		want  string
		more  bool
	}{{1, "B", true}, {2, "B,a", true}, {3, "B,a,b", false}, {1000, "B,a,b", false}} {
		l, err := f.v.List(tc.limit)
		if err != nil || strings.Join(l.Names, ",") != tc.want || l.More != tc.more {
			t.Fatalf("limit %d: %+v %v", tc.limit, l, err)
		}
	}
	for _, limit := range []int{0, -1, 1001} {
		_, err := f.v.List(limit)
		wantField(t, err, "limit")
	}
	for _, n := range []string{"b", "a", "B"} {
		if _, err := f.v.Delete(n); err != nil {
			t.Fatal(err)
		}
	}
	l, err := f.v.List(1)
	if err != nil || l.Names == nil || len(l.Names) != 0 || l.More {
		t.Fatalf("empty vault: %#v %v", l, err)
	}
}

func pad(i int) string { return strings.Repeat("0", 4-len(itoa(i))) + itoa(i) }

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// TestLostResponseReconciliation: the set's reply is lost; the client asks
// for the receipt, learns the set applied, repeats the identical set and
// gets the original success; exactly one write happened.
func TestLostResponseReconciliation(t *testing.T) {
	f := newFixture(t)
	op := sp("install:token-1")
	_ = mustSet(t, f.v, "node-id", "integration/token", "VALUE", op) // reply dropped
	if f.v.Writes() != 1 {
		t.Fatalf("writes = %d", f.v.Writes())
	}
	r := mustReceipt(t, f.v, "node-id", "install:token-1")
	if r.Status != "applied" || !r.CurrentBindingMatches || *r.Name != "integration/token" {
		t.Fatalf("receipt = %+v", r)
	}
	res := mustSet(t, f.v, "node-id", " integration/token ", "VALUE", op)
	if res != (PutResult{Revision: 1, Written: false}) {
		t.Fatalf("repeat = %+v", res)
	}
	if f.v.Writes() != 1 {
		t.Fatalf("repeat wrote: writes = %d", f.v.Writes())
	}
	// Also across a restart of the node.
	f.reopen(t)
	mustSet(t, f.v, "node-id", "integration/token", "VALUE", op)
	if f.v.Writes() != 0 {
		t.Fatalf("repeat after reopen wrote: writes = %d", f.v.Writes())
	}
	if got := mustResolve(t, f.v, "integration/token"); got != "VALUE" {
		t.Fatalf("value = %q", got)
	}
}

func TestOperationConflicts(t *testing.T) {
	f := newFixture(t)
	op := sp("install:token-1")
	mustSet(t, f.v, "n1", "a", "VALUE", op)
	w := f.v.Writes()
	_, err := modSet(f.v, modReq{NodeID: "n1", Name: "a", Value: []byte("OTHER"), OperationID: op})
	wantDomain(t, err, protocol.CodeConflict, protocol.DomainSecretOperationConflict)
	if *err.Details.MutationMayHaveApplied || *err.Details.RetrySafe {
		t.Fatalf("conflict details = %+v", err.Details)
	}
	_, err = modSet(f.v, modReq{NodeID: "n1", Name: "b", Value: []byte("VALUE"), OperationID: op})
	wantDomain(t, err, protocol.CodeConflict, protocol.DomainSecretOperationConflict)
	if f.v.Writes() != w || mustResolve(t, f.v, "a") != "VALUE" {
		t.Fatal("a conflict changed the vault")
	}
	if _, rerr := f.v.Resolve("b"); rerr == nil {
		t.Fatal("a conflict created another name")
	}
	// The same ID under another node identity is a different operation.
	mustSet(t, f.v, "n2", "b", "VALUE", op)
	if mustResolve(t, f.v, "b") != "VALUE" {
		t.Fatal("n2 set did not apply")
	}
	// An ordinary replacement makes the binding stale: the receipt stays
	// applied but no longer matches, and a repeat is a conflict, not a replay.
	mustSet(t, f.v, "n1", "a", "NEWER", nil)
	r := mustReceipt(t, f.v, "n1", "install:token-1")
	if r.Status != "applied" || r.CurrentBindingMatches || *r.Name != "a" {
		t.Fatalf("after replacement: %+v", r)
	}
	_, err = modSet(f.v, modReq{NodeID: "n1", Name: "a", Value: []byte("VALUE"), OperationID: op})
	wantDomain(t, err, protocol.CodeConflict, protocol.DomainSecretOperationConflict)
	if mustResolve(t, f.v, "a") != "NEWER" {
		t.Fatal("stale repeat replayed the old value")
	}
	// Re-setting the same value does not revive the old binding either.
	mustSet(t, f.v, "n1", "a", "VALUE", nil)
	if mustReceipt(t, f.v, "n1", "install:token-1").CurrentBindingMatches {
		t.Fatal("binding matched a later revision")
	}
}

func TestReceiptsSurviveDeletionAndExpiry(t *testing.T) {
	f := newFixture(t)
	mustSet(t, f.v, "n1", "gone", "v", sp("op-del"))
	if _, err := f.v.Delete("gone"); err != nil {
		t.Fatal(err)
	}
	r := mustReceipt(t, f.v, "n1", "op-del")
	if r.Status != "applied" || r.CurrentBindingMatches || *r.Name != "gone" {
		t.Fatalf("after delete: %+v", r)
	}
	l, _ := f.v.List(500)
	if len(l.Names) != 0 {
		t.Fatalf("receipt-only metadata listed: %v", l.Names)
	}
	if _, err := f.v.Resolve("gone"); err == nil {
		t.Fatal("deleted name resolved")
	}
	s, _ := f.v.Stats()
	if s.ReceiptOnly != 1 || s.Receipts != 1 || s.Secrets != 0 {
		t.Fatalf("stats = %+v", s)
	}
	_, err := modSet(f.v, modReq{NodeID: "n1", Name: "gone", Value: []byte("v"), OperationID: sp("op-del")})
	wantDomain(t, err, protocol.CodeConflict, protocol.DomainSecretOperationConflict)

	op := "op-exp"
	if _, err := modSet(f.v, modReq{NodeID: "n1", Name: "temp", Value: []byte("v"), OperationID: &op,
		ExpiresAt: f.clock.Now().Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if !mustReceipt(t, f.v, "n1", op).CurrentBindingMatches {
		t.Fatal("unexpired binding should match")
	}
	f.clock.Advance(time.Second)
	r = mustReceipt(t, f.v, "n1", op)
	if r.Status != "applied" || r.CurrentBindingMatches {
		t.Fatalf("after expiry: %+v", r)
	}
	f.reopen(t)
	for _, id := range []string{"op-del", op} {
		if r := mustReceipt(t, f.v, "n1", id); r.Status != "applied" || r.CurrentBindingMatches {
			t.Fatalf("%s after reopen: %+v", id, r)
		}
	}
}

func TestReceiptCapacity(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 128; i++ {
		mustSet(t, f.v, "n1", "cap", "v"+itoa(i), sp("op-"+itoa(i)))
	}
	w := f.v.Writes()
	_, err := modSet(f.v, modReq{NodeID: "n1", Name: "cap", Value: []byte("new"), OperationID: sp("op-128")})
	wantDomain(t, err, protocol.CodeConflict, protocol.DomainSecretReceiptCapacity)
	if f.v.Writes() != w || mustResolve(t, f.v, "cap") != "v127" {
		t.Fatal("capacity refusal replaced the secret")
	}
	if r := mustReceipt(t, f.v, "n1", "op-128"); r.Status != "not_found" {
		t.Fatalf("refused op has a receipt: %+v", r)
	}
	// Nothing was pruned: the oldest receipt is still there.
	if r := mustReceipt(t, f.v, "n1", "op-0"); r.Status != "applied" || r.CurrentBindingMatches {
		t.Fatalf("op-0 = %+v", r)
	}
	// Repeating the latest operation is not a new operation.
	mustSet(t, f.v, "n1", "cap", "v127", sp("op-127"))
	if f.v.Writes() != w {
		t.Fatal("repeat at capacity wrote")
	}
	// The capacity is per name, and deleted names keep counting.
	mustSet(t, f.v, "n1", "other", "v", sp("op-other"))
	if _, err := f.v.Delete("cap"); err != nil {
		t.Fatal(err)
	}
	_, err = modSet(f.v, modReq{NodeID: "n1", Name: "cap", Value: []byte("new"), OperationID: sp("op-after-delete")})
	wantDomain(t, err, protocol.CodeConflict, protocol.DomainSecretReceiptCapacity)
	f.reopen(t)
	_, err = modSet(f.v, modReq{NodeID: "n1", Name: "cap", Value: []byte("new"), OperationID: sp("op-after-reopen")})
	wantDomain(t, err, protocol.CodeConflict, protocol.DomainSecretReceiptCapacity)
	// A set without operationId adds no receipt and is not limited.
	mustSet(t, f.v, "n1", "cap", "plain", nil)
	if mustResolve(t, f.v, "cap") != "plain" {
		t.Fatal("plain set at capacity did not apply")
	}
}

func TestKeyRotationFlipsBindings(t *testing.T) {
	f := newFixture(t)
	mustSet(t, f.v, "n1", "a", "alpha", sp("op-a"))
	mustSet(t, f.v, "n1", "b", "beta", nil)
	mustSet(t, f.v, "n1", "gone", "x", sp("op-gone"))
	f.v.Delete("gone")
	if !mustReceipt(t, f.v, "n1", "op-a").CurrentBindingMatches {
		t.Fatal("binding should match before rotation")
	}
	newKeyFile := writeKey(t, filepath.Dir(f.keyFile), "new.key")
	newKey, err := LoadKeyFile(newKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.v.RotateKey(newKey); err != nil {
		t.Fatal(err)
	}
	r := mustReceipt(t, f.v, "n1", "op-a")
	if r.Status != "applied" || r.CurrentBindingMatches || *r.Name != "a" {
		t.Fatalf("after rotation: %+v", r)
	}
	if r := mustReceipt(t, f.v, "n1", "op-gone"); r.Status != "applied" || r.CurrentBindingMatches {
		t.Fatalf("deleted receipt after rotation: %+v", r)
	}
	if mustResolve(t, f.v, "a") != "alpha" || mustResolve(t, f.v, "b") != "beta" {
		t.Fatal("values changed by rotation")
	}
	_, serr := modSet(f.v, modReq{NodeID: "n1", Name: "a", Value: []byte("alpha"), OperationID: sp("op-a")})
	wantDomain(t, serr, protocol.CodeConflict, protocol.DomainSecretOperationConflict)
	mustSet(t, f.v, "n1", "a", "alpha2", sp("op-a2"))
	if !mustReceipt(t, f.v, "n1", "op-a2").CurrentBindingMatches {
		t.Fatal("new operation after rotation should match")
	}
	if err := f.v.RotateKey(newKey); !errors.Is(err, ErrSameKey) {
		t.Fatalf("rotating to the same key: %v", err)
	}
	f.v.Close()
	if _, err := New(Config{Dir: f.dir, KeyFile: f.keyFile}); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("old key after rotation: %v", err)
	}
	f.keyFile = newKeyFile
	f.open(t)
	if mustResolve(t, f.v, "a") != "alpha2" || mustResolve(t, f.v, "b") != "beta" {
		t.Fatal("values lost across rotation and reopen")
	}
	if r := mustReceipt(t, f.v, "n1", "op-a"); r.Status != "applied" || r.CurrentBindingMatches {
		t.Fatalf("old receipt after reopen: %+v", r)
	}
	l, _ := f.v.List(500)
	if strings.Join(l.Names, ",") != "a,b" {
		t.Fatalf("list after rotation = %v", l.Names)
	}
}

func TestKeySources(t *testing.T) {
	root := t.TempDir()
	good := writeKey(t, root, "good.key")
	loose := filepath.Join(root, "loose.key")
	data, _ := os.ReadFile(good)
	os.WriteFile(loose, data, 0o644)
	if _, err := New(Config{Dir: filepath.Join(root, "s1"), KeyFile: loose}); !errors.Is(err, ErrKeyFileMode) {
		t.Fatalf("0644 key file: %v", err)
	}
	os.Chmod(loose, 0o640)
	if _, err := New(Config{Dir: filepath.Join(root, "s1"), KeyFile: loose}); !errors.Is(err, ErrKeyFileMode) {
		t.Fatalf("0640 key file: %v", err)
	}
	os.Chmod(loose, 0o400)
	v, err := New(Config{Dir: filepath.Join(root, "s1"), KeyFile: loose})
	if err != nil {
		t.Fatalf("0400 key file: %v", err)
	}
	v.Close()
	if _, err := New(Config{Dir: filepath.Join(root, "s1"), KeyFile: root}); !errors.Is(err, ErrKeyFileMode) {
		t.Fatalf("directory as key file: %v", err)
	}
	short := filepath.Join(root, "short.key")
	os.WriteFile(short, []byte(strings.Repeat("ab", 31)), 0o600)
	if _, err := New(Config{Dir: filepath.Join(root, "s1"), KeyFile: short}); !errors.Is(err, ErrKeyFormat) {
		t.Fatalf("31-byte key: %v", err)
	}
	raw := filepath.Join(root, "raw.key")
	os.WriteFile(raw, []byte("\n \t"+strings.Repeat("k", 29)), 0o600) // 32 raw bytes, edges look like space
	if k, err := LoadKeyFile(raw); err != nil || string(k) != "\n \t"+strings.Repeat("k", 29) {
		t.Fatalf("raw key: %q %v", k, err)
	}
	os.WriteFile(raw, []byte(strings.Repeat("k", 33)), 0o600)
	if _, err := LoadKeyFile(raw); !errors.Is(err, ErrKeyFormat) {
		t.Fatalf("33 raw bytes: %v", err)
	}
	if _, err := New(Config{Dir: filepath.Join(root, "s1")}); !errors.Is(err, ErrKeyMissing) {
		t.Fatalf("no key: %v", err)
	}
	if _, err := New(Config{Dir: filepath.Join(root, "s1"), KeyFile: good, KeyEnv: "X"}); !errors.Is(err, ErrKeyMissing) {
		t.Fatalf("two keys: %v", err)
	}
	if err := GenerateKeyFile(good); !errors.Is(err, ErrKeyFileExist) {
		t.Fatalf("overwrite key file: %v", err)
	}
	if fi, _ := os.Stat(good); fi.Mode().Perm() != 0o600 {
		t.Fatalf("generated key mode %v", fi.Mode().Perm())
	}

	// Environment: hex and base64, removed from the environment after use.
	key, _ := LoadKeyFile(good)
	t.Setenv("LEMON_TEST_VAULT_KEY", hex.EncodeToString(key))
	v, err = New(Config{Dir: filepath.Join(root, "s2"), KeyEnv: "LEMON_TEST_VAULT_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	if _, still := os.LookupEnv("LEMON_TEST_VAULT_KEY"); still {
		t.Fatal("key variable left in the environment")
	}
	mustSet(t, v, "n1", "a", "v", nil)
	v.Close()
	t.Setenv("LEMON_TEST_VAULT_KEY", " "+b64(key)+"\n")
	v, err = New(Config{Dir: filepath.Join(root, "s2"), KeyEnv: "LEMON_TEST_VAULT_KEY"})
	if err != nil {
		t.Fatalf("base64 key: %v", err)
	}
	if mustResolve(t, v, "a") != "v" {
		t.Fatal("value under env key")
	}
	v.Close()
	if _, err := New(Config{Dir: filepath.Join(root, "s2"), KeyEnv: "LEMON_TEST_VAULT_KEY"}); !errors.Is(err, ErrKeyEnvUnset) {
		t.Fatalf("unset variable: %v", err)
	}
	// The wrong key is refused, not used to start a second vault.
	if _, err := New(Config{Dir: filepath.Join(root, "s2"), KeyFile: writeKey(t, root, "other.key")}); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("wrong key: %v", err)
	}
}

func TestVaultFileModeAndLock(t *testing.T) {
	f := newFixture(t)
	if _, err := New(Config{Dir: f.dir, KeyFile: f.keyFile}); !errors.Is(err, ErrInUse) {
		t.Fatalf("second open: %v", err)
	}
	fi, err := os.Stat(filepath.Join(f.dir, dbFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("vault file mode %v %v", fi.Mode().Perm(), err)
	}
	f.v.Close()
	os.Chmod(filepath.Join(f.dir, dbFile), 0o644)
	if _, err := New(Config{Dir: f.dir, KeyFile: f.keyFile}); !errors.Is(err, ErrVaultFileMode) {
		t.Fatalf("0644 vault: %v", err)
	}
}

func TestClosedVaultIsUnavailable(t *testing.T) {
	f := newFixture(t)
	mustSet(t, f.v, "n1", "a", "v", sp("op"))
	f.v.Close()
	_, err := modSet(f.v, modReq{NodeID: "n1", Name: "a", Value: []byte("v")})
	wantDomain(t, err, protocol.CodeUnavailable, protocol.DomainVaultUnavailable)
	_, err = f.v.List(500)
	wantDomain(t, err, protocol.CodeUnavailable, protocol.DomainVaultUnavailable)
	// A query error is never not_found.
	_, err = f.v.Record(LegacyReceiptFamily, LegacyReceiptKey("n1", "op"))
	wantDomain(t, err, protocol.CodeUnavailable, protocol.DomainVaultUnavailable)
	_, err = f.v.Delete("a")
	wantDomain(t, err, protocol.CodeUnavailable, protocol.DomainVaultUnavailable)
}

func TestConcurrentSets(t *testing.T) {
	f := newFixture(t)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				id := "g" + itoa(g) + "-" + itoa(i)
				if _, err := modSet(f.v, modReq{NodeID: "n1", Name: "shared", Value: []byte(id), OperationID: &id}); err != nil {
					t.Error(err)
				}
				f.v.List(500)
				f.v.Record(LegacyReceiptFamily, LegacyReceiptKey("n1", id))
			}
		}()
	}
	wg.Wait()
	s, _ := f.v.Stats()
	if s.Receipts != 40 || s.Secrets != 1 || f.v.Writes() != 40 {
		t.Fatalf("stats = %+v writes = %d", s, f.v.Writes())
	}
	matching := 0
	for g := 0; g < 4; g++ {
		for i := 0; i < 10; i++ {
			if mustReceipt(t, f.v, "n1", "g"+itoa(g)+"-"+itoa(i)).CurrentBindingMatches {
				matching++
			}
		}
	}
	if matching != 1 {
		t.Fatalf("%d receipts match, want exactly the last one", matching)
	}
}

// fakeCall is a hostcalls.Call for driving the table directly.
type fakeCall struct {
	nodeID    string
	blobs     map[uint32][]byte
	blobReads int
}

func (c *fakeCall) Module() string { return "secrets" }
func (c *fakeCall) Method() string { return "node.secrets.set" }
func (c *fakeCall) Invocation() hostcalls.Invocation {
	return hostcalls.Invocation{InvokeID: "i1", NodeID: c.nodeID, SessionGeneration: 1}
}
func (c *fakeCall) Blob(id uint32) ([]byte, bool) {
	c.blobReads++
	b, ok := c.blobs[id]
	return b, ok
}
func (c *fakeCall) PutBlob(b []byte) uint32 {
	id := uint32(len(c.blobs) + 1)
	c.blobs[id] = b
	return id
}
func (c *fakeCall) Await(<-chan struct{}) uint32 { return 0 }

func callHost(t testing.TB, v *Vault, c hostcalls.Call, name, args string) (string, *protocol.Error) {
	t.Helper()
	for _, hc := range v.Table() {
		if hc.Name == name {
			out, err := hc.JSONFunc()(context.Background(), c, []byte(args))
			if err != nil {
				return "", protocol.AsError(err)
			}
			return string(out), nil
		}
	}
	t.Fatalf("no host call %s", name)
	return "", nil
}

func TestTable(t *testing.T) {
	f := newFixture(t)
	want := map[string]hostcalls.AuditClass{HostCallSet: hostcalls.AuditMutation,
		HostCallList: hostcalls.AuditRead, HostCallDelete: hostcalls.AuditMutation, HostCallReceipt: hostcalls.AuditRead}
	tbl := f.v.Table()
	if len(tbl) != len(want) {
		t.Fatalf("table has %d entries", len(tbl))
	}
	for _, hc := range tbl {
		if hc.Capability != hostcalls.CapSecrets || want[hc.Name] != hc.Audit || hc.Func == nil || hc.Params == nil {
			t.Errorf("entry %+v", hc)
		}
	}
	c := &fakeCall{nodeID: "node-id", blobs: map[uint32][]byte{}}
	c.blobs[1] = []byte("VALUE_FROM_PRIVATE_BACKEND")
	set := `{"name":"integration/token","valueBlob":1,"record":{"key":"op/node-id/install:token-1","value":"applied","maxPerName":128}}`
	out, err := callHost(t, f.v, c, HostCallSet, set)
	if err != nil || out != `{"revision":1,"written":true}` {
		t.Fatalf("set = %s %v", out, err)
	}
	out, err = callHost(t, f.v, c, HostCallSet, set) // a replay writes nothing
	if err != nil || out != `{"revision":1,"written":false}` || f.v.Writes() != 1 {
		t.Fatalf("replayed set = %s %v, writes %d", out, err, f.v.Writes())
	}
	out, err = callHost(t, f.v, c, HostCallReceipt, `{"key":"op/node-id/install:token-1"}`)
	if err != nil || out != `{"found":true,"value":"applied","name":"integration/token","revision":1,"currentRevision":1,"live":true,"writtenAtMs":1700000000000}` {
		t.Fatalf("receipt = %s %v", out, err)
	}
	out, err = callHost(t, f.v, c, HostCallReceipt, `{"key":"op/node-id/never"}`)
	if err != nil || out != `{"found":false,"value":"","name":"","revision":0,"currentRevision":0,"live":false,"writtenAtMs":0}` {
		t.Fatalf("unknown receipt = %s %v", out, err)
	}
	// Records belong to the calling module's family.
	other := &otherModule{fakeCall: c}
	out, err = callHost(t, f.v, other, HostCallReceipt, `{"key":"op/node-id/install:token-1"}`)
	if err != nil || !strings.HasPrefix(out, `{"found":false`) {
		t.Fatalf("another module read the record: %s %v", out, err)
	}
	nblobs := len(c.blobs)
	out, err = callHost(t, f.v, c, HostCallList, `{"limit":1}`)
	if err != nil || out != `{"names":["integration/token"],"more":false}` || len(c.blobs) != nblobs {
		t.Fatalf("list = %s %v (blobs %d, were %d)", out, err, len(c.blobs), nblobs)
	}
	out, err = callHost(t, f.v, c, HostCallDelete, `{"name":"integration/token"}`)
	if err != nil || out != `{"deleted":true}` {
		t.Fatalf("delete = %s %v", out, err)
	}
	out, err = callHost(t, f.v, c, HostCallDelete, `{"name":"integration/token"}`)
	if err != nil || out != `{"deleted":false}` {
		t.Fatalf("second delete = %s %v", out, err)
	}
	out, err = callHost(t, f.v, c, HostCallReceipt, `{"key":"op/node-id/install:token-1"}`)
	if err != nil || out != `{"found":true,"value":"applied","name":"integration/token","revision":1,"currentRevision":1,"live":false,"writtenAtMs":1700000000000}` {
		t.Fatalf("receipt after delete = %s %v", out, err)
	}
	// Strict args; the name is checked before the blob is read.
	_, err = callHost(t, f.v, c, HostCallSet, `{"name":"a","valueBlob":1,"value":"x"}`)
	wantField(t, err, "value")
	_, err = callHost(t, f.v, c, HostCallSet, `{"name":"a"}`)
	wantField(t, err, "value")
	_, err = callHost(t, f.v, c, HostCallSet, `{"name":"a","valueBlob":99}`)
	wantField(t, err, "value")
	reads := c.blobReads
	_, err = callHost(t, f.v, c, HostCallSet, `{"name":" a","valueBlob":1}`)
	wantField(t, err, "name")
	_, err = callHost(t, f.v, c, HostCallSet, `{"name":"a","valueBlob":1,"record":{"key":""}}`)
	wantField(t, err, "record")
	if c.blobReads != reads {
		t.Fatal("a refused set read the value blob")
	}
	_, err = callHost(t, f.v, c, HostCallReceipt, `{"operationId":"x"}`)
	wantField(t, err, "operationId")
	for _, args := range []string{`{}`, `{"limit":0}`, `{"limit":1001}`, `{"limit":-1}`} {
		_, err = callHost(t, f.v, c, HostCallList, args)
		wantField(t, err, "limit")
	}
	_, err = callHost(t, f.v, c, HostCallList, `{"limit":1,"after":"a"}`)
	wantField(t, err, "after")
	c.blobs[2] = bytes.Repeat([]byte("x"), 1<<20+1)
	_, err = callHost(t, f.v, c, HostCallSet, `{"name":"a","valueBlob":2}`)
	wantField(t, err, "value")
}

// otherModule is a call from another module family.
type otherModule struct{ *fakeCall }

func (otherModule) Module() string { return "other" }
