package controller

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"lemon/protocol"
)

// TestTransferOpenRefusals: the rendezvous of a transfer request adds a
// fresh dataTicket, refuses a caller-supplied one and a malformed key, and
// serves one request per transferKey at a time.
func TestTransferOpenRefusals(t *testing.T) {
	th := newTransferHub()
	key := strings.Repeat("a", 64)
	out, end, e := th.open(json.RawMessage(` {"nodeId":"n","path":"p","transferKey":"` + key + `"} `))
	if e != nil {
		t.Fatal(e)
	}
	var p protocol.FSTransferGetParams
	if err := json.Unmarshal(out, &p); err != nil || !protocol.ValidTransferSecret(p.DataTicket) || p.TransferKey != key {
		t.Fatalf("params sent to the node: %s (%v)", out, err)
	}
	if _, _, e := th.open(json.RawMessage(`{"transferKey":"` + key + `"}`)); e == nil || e.Code != protocol.CodeConflict {
		t.Fatalf("second request with the key in flight: %v, want CONFLICT", e)
	}
	end()
	if _, end2, e := th.open(json.RawMessage(`{"transferKey":"` + key + `"}`)); e != nil {
		t.Fatalf("the key after the first request ended: %v", e)
	} else {
		end2()
	}
	for _, bad := range []string{
		`{"transferKey":"` + key + `","dataTicket":"` + key + `"}`,
		`{"transferKey":"` + key[:63] + `"}`,
		`{"transferKey":"` + strings.ToUpper(key) + `"}`,
		`{}`,
	} {
		if _, _, e := th.open(json.RawMessage(bad)); e == nil || e.Code != protocol.CodeInvalidParams {
			t.Errorf("%s: %v, want INVALID_PARAMS", bad, e)
		}
	}
}

// TestServeDataRefusals: a data socket must present exactly one valid
// credential that matches a request in flight; anything else is refused
// before the upgrade, and caller sockets waiting for their request are
// bounded (TransferMaxPending).
func TestServeDataRefusals(t *testing.T) {
	s := &Server{transfers: newTransferHub()}
	srv := httptest.NewServer(http.HandlerFunc(s.serveData))
	defer srv.Close()
	key := strings.Repeat("b", 64)
	get := func(h map[string]string, timeout time.Duration) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return -1 // the client gave up waiting
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, h := range []map[string]string{
		{},
		{protocol.HeaderTransferKey: key, protocol.HeaderTransferTicket: key},
		{protocol.HeaderTransferKey: key[:63]},
		{protocol.HeaderTransferTicket: "x"},
	} {
		if code := get(h, 5*time.Second); code != http.StatusBadRequest {
			t.Errorf("%v: status %d, want 400", h, code)
		}
	}
	if code := get(map[string]string{protocol.HeaderTransferTicket: key}, 5*time.Second); code != http.StatusNotFound {
		t.Errorf("unknown ticket: status %d, want 404", code)
	}
	// At the bound of waiting caller sockets a new one is refused at once;
	// one below it waits (here until the client gives up).
	setWaiting(s.transfers, protocol.TransferMaxPending)
	if code := get(map[string]string{protocol.HeaderTransferKey: key}, 5*time.Second); code != http.StatusNotFound {
		t.Errorf("caller over the pending bound: status %d, want 404 at once", code)
	}
	setWaiting(s.transfers, protocol.TransferMaxPending-1)
	if code := get(map[string]string{protocol.HeaderTransferKey: key}, 300*time.Millisecond); code != -1 {
		t.Errorf("caller under the pending bound: status %d, want it held waiting for its request", code)
	}
}

func setWaiting(th *transferHub, n int) {
	th.mu.Lock()
	th.waiting = n
	th.mu.Unlock()
}
