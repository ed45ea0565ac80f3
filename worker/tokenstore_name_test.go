package worker_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"lemon/protocol"
	"lemon/worker"
)

// FindByName matches a record's controller-side name or the name it was
// first joined with (trimmed, case-insensitive), prefers the former, and
// never returns a record of another controller URL.
func TestFindByNameMatchesJoinName(t *testing.T) {
	store := worker.TokenStore{Dir: filepath.Join(t.TempDir(), "execution")}
	const url, other = "wss://c.example/ws", "wss://d.example/ws"
	renamed := &worker.NodeRecord{NodeID: "node-a", Name: "gamma", JoinName: "alpha", ControllerURL: url, SessionToken: "tok-a"}
	elsewhere := &worker.NodeRecord{NodeID: "node-x", Name: "alpha", JoinName: "alpha", ControllerURL: other, SessionToken: "tok-x"}
	legacy := &worker.NodeRecord{NodeID: "node-l", Name: "legacy-1", ControllerURL: url, SessionToken: "tok-l"}
	for _, r := range []*worker.NodeRecord{renamed, elsewhere, legacy} {
		if err := store.Save(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ name, url, want string }{
		{"alpha", url, "node-a"},   // the name it was joined with
		{"gamma", url, "node-a"},   // its controller-side name
		{" ALPHA ", url, "node-a"}, // trimmed, case-insensitive like the controller
		{"alpha", other, "node-x"}, // the other controller's own record
		{"gamma", other, ""},       // never a record of another controller
		{"legacy-1", url, "node-l"},
		{"legacy-1", "", ""},
		{"", url, ""},
		{"beta", url, ""},
	} {
		got, err := store.FindByName(tc.name, tc.url)
		switch {
		case tc.want == "" && !errors.Is(err, worker.ErrNoRecord):
			t.Errorf("FindByName(%q, %q): %v, %v; want ErrNoRecord", tc.name, tc.url, got, err)
		case tc.want != "" && (err != nil || got.NodeID != tc.want):
			t.Errorf("FindByName(%q, %q): %v, %v; want %s", tc.name, tc.url, got, err, tc.want)
		}
	}
	// Another identity that now holds the freed name "alpha" on the same
	// controller wins over the renamed one's join name.
	fresh := &worker.NodeRecord{NodeID: "node-b", Name: "alpha", JoinName: "alpha", ControllerURL: url, SessionToken: "tok-b"}
	if err := store.Save(fresh); err != nil {
		t.Fatal(err)
	}
	if got, err := store.FindByName("alpha", url); err != nil || got.NodeID != "node-b" {
		t.Fatalf("alpha after another node took it: %v, %v", got, err)
	}
	if got, err := store.FindByName("gamma", url); err != nil || got.NodeID != "node-a" {
		t.Fatalf("gamma: %v, %v", got, err)
	}
	if renamed.LocalName() != "alpha" || legacy.LocalName() != "legacy-1" {
		t.Fatalf("LocalName: %q %q", renamed.LocalName(), legacy.LocalName())
	}
}

// After an operator renames a paired node, a re-pairing (recovery
// credential) stores the new controller-side name, keeps the node ID and
// the name it was joined with, and the record is found by either name for
// that controller only. A record written before JoinName existed keeps
// its stored name as the join name.
func TestRepairAfterRenameKeepsJoinName(t *testing.T) {
	store := worker.TokenStore{Dir: filepath.Join(t.TempDir(), "execution")}
	c := startController(t, t.TempDir(), "")
	onCode, _ := approver(t, c)
	cfg := pairCfg(c, store, " alpha ")
	cfg.OnCode = onCode
	rec, err := worker.Pair(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Name != "alpha" || rec.JoinName != "alpha" {
		t.Fatalf("new record: name %q join %q", rec.Name, rec.JoinName)
	}
	op := c.operator(t)
	rename := func(name string) {
		t.Helper()
		if _, perr := op.Call(context.Background(), protocol.MethodNodeRename,
			protocol.NodeRenameParams{NodeID: rec.NodeID, Name: name}); perr != nil {
			t.Fatalf("rename: %s", perr.Message)
		}
	}
	rename("beta")
	// Before the re-pairing the record still holds the old name.
	found, err := store.FindByName("alpha", c.URL)
	if err != nil || found.NodeID != rec.NodeID {
		t.Fatalf("before re-pairing: %v, %v", found, err)
	}
	cfg = pairCfg(c, store, "alpha")
	cfg.Existing = found
	rec2, err := worker.Pair(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rec2.NodeID != rec.NodeID || rec2.Name != "beta" || rec2.JoinName != "alpha" || rec2.RecoveryCredential == rec.RecoveryCredential {
		t.Fatalf("re-paired: %v join %q", rec2, rec2.JoinName)
	}
	for _, name := range []string{"alpha", "beta"} {
		got, err := store.FindByName(name, c.URL)
		if err != nil || got.NodeID != rec.NodeID || got.SessionToken != rec2.SessionToken || got.Name != "beta" || got.JoinName != "alpha" {
			t.Fatalf("FindByName(%q) after re-pairing: %v, %v", name, got, err)
		}
		if _, err := store.FindByName(name, "ws://127.0.0.1:1/ws"); !errors.Is(err, worker.ErrNoRecord) {
			t.Fatalf("FindByName(%q) for another controller: %v", name, err)
		}
	}

	// A legacy record (no JoinName) re-paired after another rename: its
	// stored name becomes the join name.
	legacy := *rec2
	legacy.JoinName = ""
	if err := store.Save(&legacy); err != nil {
		t.Fatal(err)
	}
	rename("gamma")
	cfg = pairCfg(c, store, "beta")
	cfg.Existing = &legacy
	rec3, err := worker.Pair(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rec3.NodeID != rec.NodeID || rec3.Name != "gamma" || rec3.JoinName != "beta" {
		t.Fatalf("legacy re-paired: %v join %q", rec3, rec3.JoinName)
	}

	// --repair --node-id (operator-approved, no Existing) keeps the join
	// name of the identity's stored record. Only a node without a recovery
	// credential on the controller can be repaired: make it legacy.
	c = c.makeLegacy(rec.NodeID)
	onCode, _ = approver(t, c)
	cfg = pairCfg(c, store, "")
	cfg.Repair, cfg.NodeID, cfg.OnCode = true, rec.NodeID, onCode
	rec4, err := worker.Pair(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rec4.NodeID != rec.NodeID || rec4.Name != "gamma" || rec4.JoinName != "beta" {
		t.Fatalf("repaired: %v join %q", rec4, rec4.JoinName)
	}
}
