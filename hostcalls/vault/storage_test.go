package vault

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"lemon/protocol"
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// rawDB opens the closed vault's file directly.
func rawDB(t *testing.T, dir string) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, dbFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestCiphertextBoundToNameAndRevision(t *testing.T) {
	f := newFixture(t)
	mustSet(t, f.v, "n1", "a", "AAAA", nil)
	mustSet(t, f.v, "n1", "b", "BBBB", nil)
	keys := f.v.keys
	ka, kb := keys.nameKey("a"), keys.nameKey("b")
	f.v.Close()

	// Swap the two value ciphertexts: both fail to open.
	db := rawDB(t, f.dir)
	var oldA []byte
	db.Update(func(tx *bolt.Tx) error {
		vals := tx.Bucket(bucketValues)
		va, vb := bytes.Clone(vals.Get(ka)), bytes.Clone(vals.Get(kb))
		oldA = va
		vals.Put(ka, vb)
		return vals.Put(kb, va)
	})
	db.Close()
	f.open(t)
	for _, n := range []string{"a", "b"} {
		_, err := f.v.Resolve(n)
		wantDomain(t, err, protocol.CodeInternal, protocol.DomainVaultCorrupt)
	}
	// Put them back, then replay revision 1 of a under revision 2.
	f.v.Close()
	db = rawDB(t, f.dir)
	db.Update(func(tx *bolt.Tx) error {
		vals := tx.Bucket(bucketValues)
		vb := bytes.Clone(vals.Get(ka))
		vals.Put(ka, oldA)
		return vals.Put(kb, vb)
	})
	db.Close()
	f.open(t)
	if mustResolve(t, f.v, "a") != "AAAA" || mustResolve(t, f.v, "b") != "BBBB" {
		t.Fatal("restored ciphertexts do not open")
	}
	mustSet(t, f.v, "n1", "a", "AAAA", nil) // revision 2, same plaintext
	f.v.Close()
	db = rawDB(t, f.dir)
	var newA []byte
	db.Update(func(tx *bolt.Tx) error {
		vals := tx.Bucket(bucketValues)
		newA = bytes.Clone(vals.Get(ka))
		return vals.Put(ka, oldA)
	})
	db.Close()
	if bytes.Equal(newA[:12], oldA[:12]) || bytes.Equal(newA, oldA) {
		t.Fatal("the same plaintext was sealed with the same nonce")
	}
	f.open(t)
	_, err := f.v.Resolve("a")
	wantDomain(t, err, protocol.CodeInternal, protocol.DomainVaultCorrupt)

	// A flipped bit in any metadata record stops the vault from opening.
	f.v.Close()
	db = rawDB(t, f.dir)
	db.Update(func(tx *bolt.Tx) error {
		ents := tx.Bucket(bucketEntries)
		e := bytes.Clone(ents.Get(kb))
		e[len(e)-1] ^= 1
		return ents.Put(kb, e)
	})
	db.Close()
	if _, err := New(Config{Dir: f.dir, KeyFile: f.keyFile}); err != ErrCorrupt {
		t.Fatalf("tampered entry: %v", err)
	}
}

// fileImage reads the vault file.
func fileImage(t *testing.T, dir string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, dbFile))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCrashBeforeCommitIsDurable builds the disk images a crash between
// writing a transaction and fsyncing its commit can leave, and checks each
// opens as a readable vault holding the state before the write. bbolt
// writes a transaction's pages to free space, fsyncs, then writes one of
// its two meta pages and fsyncs again; the images are: (1) new pages
// written, meta page not yet written; (2) the meta page torn half way.
func TestCrashBeforeCommitIsDurable(t *testing.T) {
	f := newFixture(t)
	mustSet(t, f.v, "n1", "kept", "old", sp("op-kept"))
	mustSet(t, f.v, "n1", "other", "o", nil)
	// One transaction between the two images: the crash model is a
	// crash inside the last commit.
	before := fileImage(t, f.dir)
	mustSet(t, f.v, "n1", "added", "x", sp("op-added"))
	after := fileImage(t, f.dir)
	f.v.Close()

	db := rawDB(t, f.dir)
	pageSize := db.Info().PageSize
	db.Close()
	if len(after) < 2*pageSize || len(before) < 2*pageSize {
		t.Fatalf("file sizes %d %d", len(before), len(after))
	}
	changedMeta := -1
	for p := 0; p < 2; p++ {
		if !bytes.Equal(before[p*pageSize:(p+1)*pageSize], after[p*pageSize:(p+1)*pageSize]) {
			changedMeta = p
		}
	}
	if changedMeta < 0 {
		t.Fatal("no meta page changed")
	}

	images := map[string][]byte{}
	img := bytes.Clone(after)
	copy(img[:2*pageSize], before[:2*pageSize])
	images["pages written, meta not written"] = img
	img = bytes.Clone(after)
	copy(img[:2*pageSize], before[:2*pageSize])
	off := changedMeta * pageSize
	copy(img[off:off+pageSize/2], after[off:off+pageSize/2]) // first half new, second half old
	for i := off + 16; i < off+64; i++ {
		img[i] ^= 0xff // and a garbled header region
	}
	images["meta page torn"] = img

	for name, img := range images {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, dbFile), img, 0o600); err != nil {
				t.Fatal(err)
			}
			v, err := New(Config{Dir: dir, KeyFile: f.keyFile})
			if err != nil {
				t.Fatalf("crash image does not open: %v", err)
			}
			defer v.Close()
			if got := mustResolve(t, v, "kept"); got != "old" {
				t.Fatalf("kept = %q", got)
			}
			if got := mustResolve(t, v, "other"); got != "o" {
				t.Fatalf("other = %q", got)
			}
			if _, err := v.Resolve("added"); err == nil {
				t.Fatal("uncommitted name present")
			}
			if r := mustReceipt(t, v, "n1", "op-kept"); !r.CurrentBindingMatches {
				t.Fatalf("op-kept = %+v", r)
			}
			if r := mustReceipt(t, v, "n1", "op-added"); r.Status != "not_found" {
				t.Fatalf("op-added = %+v", r)
			}
			// The vault keeps working after recovery.
			mustSet(t, v, "n1", "added", "y", sp("op-added"))
			if mustResolve(t, v, "added") != "y" {
				t.Fatal("write after recovery")
			}
		})
	}
}

func TestInterruptedRotationLeavesOldVault(t *testing.T) {
	f := newFixture(t)
	mustSet(t, f.v, "n1", "a", "alpha", sp("op-a"))
	f.v.Close()
	// A partial rotated file: half of a real vault file, as if the
	// rotation died mid-write before its rename.
	partial := fileImage(t, f.dir)
	os.WriteFile(filepath.Join(f.dir, rotateFile), partial[:len(partial)/2], 0o600)
	f.open(t)
	if mustResolve(t, f.v, "a") != "alpha" || !mustReceipt(t, f.v, "n1", "op-a").CurrentBindingMatches {
		t.Fatal("old vault not intact after an interrupted rotation")
	}
	if _, err := os.Stat(filepath.Join(f.dir, rotateFile)); !os.IsNotExist(err) {
		t.Fatalf("leftover rotation file not removed: %v", err)
	}
}

// TestKillMidWrite runs sets with operation IDs in a child process, kills it
// with SIGKILL while it writes, and checks the vault opens with every
// acknowledged set present and the in-flight one either wholly applied
// (value and receipt) or wholly absent.
func TestKillMidWrite(t *testing.T) {
	if os.Getenv("LEMON_VAULT_CRASH_CHILD") != "" {
		return
	}
	root := t.TempDir()
	keyFile := writeKey(t, root, "master.key")
	dir := filepath.Join(root, "state")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillMidWriteChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LEMON_VAULT_CRASH_CHILD="+dir, "LEMON_VAULT_CRASH_KEY="+keyFile)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	last := -1
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "acked ") {
			continue
		}
		last, _ = strconv.Atoi(strings.TrimPrefix(line, "acked "))
		if last >= 12 {
			break
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if last < 12 {
		t.Fatalf("child acknowledged only %d sets", last)
	}
	v, err := New(Config{Dir: dir, KeyFile: keyFile})
	if err != nil {
		t.Fatalf("vault after kill: %v", err)
	}
	defer v.Close()
	for i := 0; i <= last+1; i++ {
		name, op, value := crashRecord(i)
		r := mustReceipt(t, v, "n1", op)
		got, rerr := v.Resolve(name)
		switch {
		case r.Status == "applied":
			if rerr != nil || !bytes.Equal(got, value) || !r.CurrentBindingMatches {
				t.Fatalf("set %d applied but value or binding wrong: %v", i, rerr)
			}
		case i <= last:
			t.Fatalf("acknowledged set %d lost", i)
		default:
			if rerr == nil {
				t.Fatalf("in-flight set %d has a value without a receipt", i)
			}
		}
	}
}

func crashRecord(i int) (name, op string, value []byte) {
	return fmt.Sprintf("crash/%04d", i), fmt.Sprintf("op-%d", i),
		bytes.Repeat([]byte{byte('a' + i%26)}, 256<<10)
}

// TestKillMidWriteChild is the child of TestKillMidWrite; it does nothing
// unless started by it.
func TestKillMidWriteChild(t *testing.T) {
	dir, keyFile := os.Getenv("LEMON_VAULT_CRASH_CHILD"), os.Getenv("LEMON_VAULT_CRASH_KEY")
	if dir == "" {
		t.Skip("helper process")
	}
	v, err := New(Config{Dir: dir, KeyFile: keyFile})
	if err != nil {
		fmt.Println("open failed")
		os.Exit(1)
	}
	for i := 0; ; i++ {
		name, op, value := crashRecord(i)
		if _, err := modSet(v, modReq{NodeID: "n1", Name: name, Value: value, OperationID: &op}); err != nil {
			fmt.Println("set failed")
			os.Exit(1)
		}
		fmt.Printf("acked %d\n", i)
	}
}

// TestCanaryNeverLeaks plants a canary name and value, drives every
// operation (successes and errors, through the host-call table), rotates
// the key and reopens; then searches every error message, every host-call
// result and every file under the test's directories for the canary bytes
// in plain, hex and base64 form. Only the encrypted vault holds them.
func TestCanaryNeverLeaks(t *testing.T) {
	const canaryName = "CANARY-NAME-5c1e0b7a93"
	const canaryValue = "CANARY-VALUE-d8f24e6b10"
	const canaryRun = "CANARYRUN-41aa7c"
	f := newFixture(t)
	root := filepath.Dir(f.dir)
	var messages, results []string
	record := func(out string, err *protocol.Error) {
		if out != "" {
			results = append(results, out)
		}
		if err != nil {
			b, _ := json.Marshal(err)
			messages = append(messages, err.Error(), string(b))
		}
	}
	c := &fakeCall{nodeID: "node-id", blobs: map[uint32][]byte{
		1: []byte(canaryValue), 2: []byte(canaryValue + "-2"),
		3: bytes.Repeat([]byte(canaryValue), (1<<20)/len(canaryValue)+1)}}
	call := func(name, args string) { record(callHost(t, f.v, c, name, args)) }

	rec := func(op string) string {
		return `"record":{"key":"op/node-id/` + op + `","value":"applied","maxPerName":128}`
	}
	call(HostCallSet, `{"name":"`+canaryName+`","valueBlob":1,`+rec("op-canary")+`}`)
	call(HostCallSet, `{"name":"`+canaryName+`","valueBlob":1,`+rec("op-canary")+`}`) // repeat
	call(HostCallSet, `{"name":"`+canaryName+`","valueBlob":2,`+rec("op-canary")+`}`) // conflict
	call(HostCallSet, `{"name":"`+canaryName+`","valueBlob":3}`)                      // too large
	call(HostCallSet, `{"name":"`+canaryName+`\u0000","valueBlob":1}`)                // NUL
	call(HostCallSet, `{"name":"`+strings.Repeat(canaryName, 20)+`","valueBlob":1}`)  // too long
	call(HostCallSet, `{"name":"`+canaryName+`","valueBlob":1,"record":{"key":"`+canaryName+`\u0000"}}`)
	call(HostCallSet, `{"name":"lemon_bot/invocations/`+canaryRun+`","valueBlob":1,`+rec(canaryRun)+`}`)
	for i := 0; i < 128; i++ {
		call(HostCallSet, fmt.Sprintf(`{"name":"%s-cap","valueBlob":2,%s}`, canaryName, rec(fmt.Sprintf("op-%d", i))))
	}
	call(HostCallSet, `{"name":"`+canaryName+`-cap","valueBlob":2,`+rec("op-full")+`}`) // capacity
	call(HostCallReceipt, `{"key":"op/node-id/op-canary"}`)
	call(HostCallList, `{"limit":500}`)
	call(HostCallSet, `{"name":"`+canaryName+`-del","valueBlob":1,`+rec("op-del")+`}`)
	call(HostCallDelete, `{"name":"`+canaryName+`-del"}`)
	call(HostCallDelete, `{"name":"`+canaryName+`\u0000"}`)

	newKey := writeKey(t, root, "new.key")
	k, _ := LoadKeyFile(newKey)
	if err := f.v.RotateKey(k); err != nil {
		t.Fatal(err)
	}
	f.v.Close()
	_, err := New(Config{Dir: f.dir, KeyFile: f.keyFile}) // wrong key now
	messages = append(messages, err.Error())
	f.keyFile = newKey
	f.open(t)
	if mustResolve(t, f.v, canaryName) != canaryValue {
		t.Fatal("canary not stored")
	}
	_, serr := modSet(f.v, modReq{NodeID: "node-id", Name: canaryName, Value: []byte(canaryValue), OperationID: sp("op-canary")})
	record("", serr) // conflict after rotation
	f.v.Close()

	needles := map[string][]byte{}
	for _, s := range []string{canaryName, canaryValue, canaryRun} {
		needles[s] = []byte(s)
		needles["hex "+s] = []byte(hex.EncodeToString([]byte(s)))
		needles["base64 "+s] = []byte(b64([]byte(s))[:len(s)]) // prefix: alignment-independent enough
	}
	if len(messages) < 10 {
		t.Fatalf("only %d error messages collected", len(messages))
	}
	for _, m := range messages {
		for label, n := range needles {
			if bytes.Contains([]byte(m), n) {
				t.Errorf("error message holds %s: %s", label, m)
			}
		}
	}
	for _, r := range results {
		if strings.Contains(r, canaryValue) || strings.Contains(r, hex.EncodeToString([]byte(canaryValue))) {
			t.Errorf("host-call result holds the value: %.80s", r)
		}
	}
	files := 0
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		files++
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for label, n := range needles {
			if bytes.Contains(b, n) {
				t.Errorf("%s holds %s", filepath.Base(p), label)
			}
		}
		return nil
	})
	if files < 3 {
		t.Fatalf("searched only %d files", files)
	}
}

// TestLegacyReceiptsBecomeRecords: a vault written before module records
// kept receipts inside each name's metadata. Opening it converts them to
// records of the secrets module (docs/SECRETS.md, "Receipts"), written
// back in one transaction, so a receipt issued before the upgrade is
// still answered (never not_found) and still replays.
func TestLegacyReceiptsBecomeRecords(t *testing.T) {
	f := newFixture(t)
	mustSet(t, f.v, "", "legacy", "VALUE", nil)
	mustSet(t, f.v, "", "deleted", "x", nil)
	keys := f.v.keys
	f.v.Close()
	db := rawDB(t, f.dir)
	// Rewrite both entries in the old format: receipts inside, no records
	// bucket, and "deleted" as receipt-only metadata.
	err := db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketRecords); err != nil {
			return err
		}
		for _, e := range []*entry{
			{Name: "legacy", Revision: 1, Active: true, Receipts: []legacyReceipt{{NodeID: "n1", OperationID: "op-old", Revision: 1, AppliedAtMs: 42}}},
			{Name: "deleted", Revision: 1, Receipts: []legacyReceipt{{NodeID: "n1", OperationID: "op-gone", Revision: 1, AppliedAtMs: 43}}},
		} {
			if err := putEntry(tx, keys, e); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketValues).Delete(keys.nameKey("deleted"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	f.open(t)
	if r := mustReceipt(t, f.v, "n1", "op-old"); r.Status != "applied" || !r.CurrentBindingMatches || *r.Name != "legacy" {
		t.Fatalf("legacy receipt = %+v", r)
	}
	if r := mustReceipt(t, f.v, "n1", "op-gone"); r.Status != "applied" || r.CurrentBindingMatches {
		t.Fatalf("legacy receipt of a deleted name = %+v", r)
	}
	if s, _ := f.v.Stats(); s != (Stats{Secrets: 1, ReceiptOnly: 1, Receipts: 2}) {
		t.Fatalf("stats = %+v", s)
	}
	if res := mustSet(t, f.v, "n1", "legacy", "VALUE", sp("op-old")); res.Written || f.v.Writes() != 0 {
		t.Fatalf("replay of a legacy receipt = %+v, writes %d", res, f.v.Writes())
	}
	// The conversion was written: the file holds no legacy receipt any more.
	f.v.Close()
	db = rawDB(t, f.dir)
	db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEntries).ForEach(func(k, sealed []byte) error {
			pt, err := keys.open(sealed, entryAAD(k))
			if err != nil || bytes.Contains(pt, []byte("receipts")) {
				t.Errorf("entry after conversion: %s %v", pt, err)
			}
			return nil
		})
	})
	db.Close()
	f.open(t)
	if r := mustReceipt(t, f.v, "n1", "op-old"); r.Status != "applied" || !r.CurrentBindingMatches {
		t.Fatalf("after a second open = %+v", r)
	}
}
