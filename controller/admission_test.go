package controller

import (
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"lemon/protocol"
)

// A socket past the cap waits for a slot (Config.AdmissionWait) and is
// admitted when one frees; the waiters are bounded by 16 per slot (at the
// bound 16 wait, one past is closed at once).
func TestAdmissionWait(t *testing.T) {
	cfg := testConfig()
	cfg.MaxUnauthenticated = 1
	cfg.MaxUnauthenticatedPerAddress = 1
	cfg.AdmissionWait = testWait
	s := startServer(t, cfg)
	first := mustUpgrade(t, s, "127.0.0.1")
	type dialed struct {
		ws  *websocket.Conn
		err error
	}
	waiters := make(chan dialed, waitersPerSlot)
	for i := range waitersPerSlot {
		go func() {
			ws, err := upgradeFrom(s, "127.0.0."+strconv.Itoa(i+2))
			waiters <- dialed{ws, err}
		}()
	}
	waitFor(t, "16 sockets to wait", func() bool {
		s.guard.mu.Lock()
		defer s.guard.mu.Unlock()
		return s.guard.waiting == waitersPerSlot
	})
	// The pool of waiters is full: one more socket is closed at once.
	if ws, err := upgradeFrom(s, "127.0.0.100"); err == nil {
		ws.Close()
		t.Fatal("a socket past the waiters' bound was admitted")
	}
	if got := s.guard.refused.Load(); got != 1 {
		t.Fatalf("refused %d, want 1", got)
	}
	// Connecting frees the slot: a waiter gets it, and each connect lets
	// the next one in.
	if f := sendConnect(t, first, adminToken); f.Type != protocol.FrameHelloOK {
		t.Fatalf("connect: %s", f.raw)
	}
	for range waitersPerSlot {
		d := <-waiters
		if d.err != nil {
			t.Fatalf("a waiting socket was not admitted: %v", d.err)
		}
		defer d.ws.Close()
		if f := sendConnect(t, d.ws, adminToken); f.Type != protocol.FrameHelloOK {
			t.Fatalf("connect after waiting: %s", f.raw)
		}
	}
}

// A waiter that finds no slot within AdmissionWait is closed.
func TestAdmissionWaitTimesOut(t *testing.T) {
	cfg := testConfig()
	cfg.MaxUnauthenticated = 1
	cfg.AdmissionWait = 100 * time.Millisecond
	s := startServer(t, cfg)
	mustUpgrade(t, s, "127.0.0.1")
	if ws, err := upgradeFrom(s, "127.0.0.2"); err == nil {
		ws.Close()
		t.Fatal("a socket was admitted past the cap")
	}
	if got := s.guard.refused.Load(); got != 1 {
		t.Fatalf("refused %d, want 1", got)
	}
}
