package controller

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"lemon/protocol"
)

// TestAdv4TransferWaitersDoNotLockOutCallers: with TransferMaxPending
// sockets already waiting on unknown keys (unauthenticated sockets any
// peer can open), the caller of a registered request still claims its
// side at once; a further unknown key is refused.
func TestAdv4TransferWaitersDoNotLockOutCallers(t *testing.T) {
	th := newTransferHub()
	th.waiting = protocol.TransferMaxPending // as if that many bogus sockets wait
	secret := strings.Repeat("5", 64)
	key := transferHash(secret)
	_, end, e := th.open(json.RawMessage(`{"nodeId":"n","path":"p","transferKey":"` + key + `"}`))
	if e != nil {
		t.Fatal(e)
	}
	defer end()
	if rv := th.claimCaller(context.Background(), key); rv == nil {
		t.Fatal("the caller of a registered transfer was refused while the waiting slots were full")
	}
	if rv := th.claimCaller(context.Background(), key); rv != nil {
		t.Fatal("a second caller socket for the same key was accepted")
	}
	if rv := th.claimCaller(context.Background(), transferHash(strings.Repeat("6", 64))); rv != nil {
		t.Fatal("an unknown key was admitted past TransferMaxPending")
	}
}
