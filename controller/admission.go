package controller

import (
	"errors"
	"net"
	"sync"
	"time"
)

// Admission of sockets past the unauthenticated caps (docs/SCALE.md, "The
// reconnect herd"). Closing such a socket at once turns a reconnect herd
// (thousands of nodes back after a restart) into a cascade: every refused
// node backs off further, up to 30 s, although slots free within
// milliseconds as handshakes complete. So a socket past a cap first waits
// up to Config.AdmissionWait for a slot, in a bounded pool of waiters (16
// per slot of MaxUnauthenticated); a new socket does not pass the ones
// waiting. A socket still without a slot then, or one that finds the pool
// full, is closed as before. Waiting sockets are not read.

// guardedListener admits the sockets of one listener within the caps of
// its connGuard.
type guardedListener struct {
	net.Listener
	g    *connGuard
	wait time.Duration // 0: sockets past a cap are closed at once

	once      sync.Once
	results   chan acceptResult // sockets admitted (or the listener's errors)
	closed    chan struct{}     // closed by Close (newGuardedListener makes it)
	closeOnce sync.Once
}

type acceptResult struct {
	c   net.Conn
	err error
}

// Accept returns the next socket within the caps.
func (l *guardedListener) Accept() (net.Conn, error) {
	if l.wait <= 0 {
		for {
			c, err := l.Listener.Accept()
			if err != nil {
				return nil, err
			}
			key := addrKey(c.RemoteAddr())
			if l.g.admit(key) {
				return &guardedConn{Conn: c, g: l.g, key: key}, nil
			}
			l.g.refuse(c)
		}
	}
	l.start()
	select {
	case r := <-l.results:
		return r.c, r.err
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *guardedListener) start() {
	l.once.Do(func() {
		l.results = make(chan acceptResult)
		go l.loop()
	})
}

func newGuardedListener(ln net.Listener, g *connGuard, wait time.Duration) *guardedListener {
	return &guardedListener{Listener: ln, g: g, wait: wait, closed: make(chan struct{})}
}

// Close closes the listener and drops the sockets waiting for a slot.
func (l *guardedListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

func (l *guardedListener) deliver(r acceptResult) bool {
	select {
	case l.results <- r:
		return true
	case <-l.closed:
		if r.c != nil {
			r.c.Close()
		}
		return false
	}
}

// loop accepts sockets and admits them, or hands them to a waiter.
func (l *guardedListener) loop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !l.deliver(acceptResult{err: err}) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				continue // http.Server retries after a pause
			}
			// A permanent error ends the listener: Serve returns it.
			<-l.closed
			return
		}
		key := addrKey(c.RemoteAddr())
		ok, freed := l.g.tryAdmit(key, false)
		if ok {
			if !l.deliver(acceptResult{c: &guardedConn{Conn: c, g: l.g, key: key}}) {
				return
			}
			continue
		}
		if !l.g.startWait() {
			l.g.refuse(c)
			continue
		}
		go l.waitForSlot(c, key, freed)
	}
}

// waitForSlot holds c until a slot for key frees, for at most l.wait.
func (l *guardedListener) waitForSlot(c net.Conn, key string, freed <-chan struct{}) {
	defer l.g.endWait()
	timer := time.NewTimer(l.wait)
	defer timer.Stop()
	for {
		select {
		case <-freed:
			var ok bool
			if ok, freed = l.g.tryAdmit(key, true); ok {
				l.deliver(acceptResult{c: &guardedConn{Conn: c, g: l.g, key: key}})
				return
			}
		case <-timer.C:
			l.g.refuse(c)
			return
		case <-l.closed:
			c.Close()
			return
		}
	}
}

// waitersPerSlot: at most this many sockets wait per unauthenticated
// slot (4,096 with the default 256 slots). A waiting socket costs a
// descriptor and a goroutine, no buffer: it is not read.
const waitersPerSlot = 16

// startWait takes a place among the waiting sockets (at most
// max·waitersPerSlot).
func (g *connGuard) startWait() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.waiting >= g.max*waitersPerSlot {
		return false
	}
	g.waiting++
	return true
}

func (g *connGuard) endWait() {
	g.mu.Lock()
	g.waiting--
	g.mu.Unlock()
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}
