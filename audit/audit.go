// Package audit writes content-free audit records as JSON Lines, one
// object per line, to a size-rotated file (lumberjack) or to any writer
// such as stdout (docs/OPERATIONS.md, "Audit").
//
// A record names who did what and how it ended: the principal (an
// operator entry name), its scopes, the method, the node and invoke ids,
// the host call, the outcome and error code, and the duration. It never
// holds a path, argv, secret name or value, token, or any request or
// result content: callers fill only the bounded fields below.
//
// A Sink may be fail-closed, as Vault's audit devices are: after a write
// fails the sink is unhealthy, Admit refuses new requests, and the first
// write that succeeds again (a refused request's own record, or Probe)
// makes it healthy. A fail-open sink only counts and reports its
// failures.
package audit

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"
)

// Record is one audit line. Empty fields are omitted. Strings are bounded
// by their sources (method names and ids at most 128 bytes, codes are
// protocol codes); Write also cuts any field to MaxField bytes.
type Record struct {
	// Time is when the request or host call ended (RFC 3339, UTC, ns).
	Time time.Time `json:"time"`
	// Source is "controller" (one record per operator request) or "node"
	// (one record per host call).
	Source string `json:"source"`
	// Principal is the operator entry name the request ran as.
	Principal string `json:"principal,omitempty"`
	// Scopes are the scopes the operator's connection holds.
	Scopes []string `json:"scopes,omitempty"`
	// Method is the requested method ("other" for a name outside the
	// route table), or the node method a host call served.
	Method string `json:"method"`
	// NodeID is the node the request was routed to, if any.
	NodeID string `json:"nodeId,omitempty"`
	// InvokeID joins a controller record to the node's host-call records.
	InvokeID string `json:"invokeId,omitempty"`
	// Module and HostCall name the family and host call (node records).
	Module   string `json:"module,omitempty"`
	HostCall string `json:"hostcall,omitempty"`
	// Outcome is "ok", "error", or a bounded refusal class
	// ("capability_denied", "rate_limited", "timeout", "audit_unavailable").
	Outcome string `json:"outcome"`
	// Code is the protocol error code, or its domain code when it has one.
	Code string `json:"code,omitempty"`
	// Domain is the error's domain code (docs/PROTOCOL.md), if any.
	Domain string `json:"domain,omitempty"`
	// DurationMs is how long the request or host call took, in ms.
	DurationMs float64 `json:"durationMs"`
}

// MaxField is the most bytes of any one string field Write keeps.
const MaxField = 256

// Default rotation of an audit file: 100 MiB per file, 10 old files kept.
const (
	DefaultMaxSizeMB  = 100
	DefaultMaxBackups = 10
)

// ErrUnavailable is returned by Admit while a fail-closed sink cannot write.
var ErrUnavailable = errors.New("audit: the audit sink cannot write")

// Config opens a Sink.
type Config struct {
	// File is the audit file; "-" writes to stdout. Its directory must
	// exist. The file is created 0600 and rotated by size.
	File string
	// MaxSizeMB is the size in MiB at which the file rotates (default
	// DefaultMaxSizeMB); MaxBackups is how many rotated files are kept
	// (default DefaultMaxBackups). Rotated files are name-timestamp.ext.
	MaxSizeMB  int
	MaxBackups int
	// FailClosed makes Admit refuse requests while writes fail.
	FailClosed bool
}

// Sink writes records. It is safe for concurrent use; a nil *Sink
// discards records and admits everything.
type Sink struct {
	w          io.Writer
	closer     io.Closer
	failClosed bool

	mu  sync.Mutex
	buf []byte

	unhealthy atomic.Bool
	written   atomic.Uint64
	failed    atomic.Uint64
	lastProbe atomic.Int64 // unix ns of the last Probe write
}

// Open opens the sink cfg names: stdout for "-", else a rotated file.
func Open(cfg Config) (*Sink, error) {
	if cfg.File == "" {
		return nil, errors.New("audit: no file given (use - for stdout)")
	}
	if cfg.File == "-" {
		return New(os.Stdout, cfg.FailClosed), nil
	}
	if cfg.MaxSizeMB <= 0 {
		cfg.MaxSizeMB = DefaultMaxSizeMB
	}
	if cfg.MaxBackups <= 0 {
		cfg.MaxBackups = DefaultMaxBackups
	}
	// Fail at start, not at the first request, when the file cannot be
	// opened for appending.
	// O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) instead
	// of blocking the start. Only a regular file can be rotated (a device
	// such as /dev/stderr would be renamed at 100 MiB, then fail every
	// write): anything else is refused, and "-" is the way to stdout.
	f, err := os.OpenFile(cfg.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, errors.New("audit: cannot open the audit file: " + errReason(err))
	}
	st, err := f.Stat()
	f.Close()
	if err != nil || !st.Mode().IsRegular() {
		return nil, errors.New("audit: the audit file must be a regular file (use - for stdout)")
	}
	lj := &lumberjack.Logger{Filename: cfg.File, MaxSize: cfg.MaxSizeMB, MaxBackups: cfg.MaxBackups}
	s := New(lj, cfg.FailClosed)
	s.closer = lj
	return s, nil
}

// errReason is the operating system's reason without the path.
func errReason(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return "unknown error"
}

// New returns a sink over w (each record is one Write call).
func New(w io.Writer, failClosed bool) *Sink {
	return &Sink{w: w, failClosed: failClosed}
}

// FailClosed reports whether the sink refuses requests while unhealthy.
func (s *Sink) FailClosed() bool { return s != nil && s.failClosed }

// Write appends r as one JSON line. A failed write marks the sink
// unhealthy until a later write succeeds; the error never holds record
// content.
func (s *Sink) Write(r *Record) error {
	if s == nil {
		return nil
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	r.Time = r.Time.UTC()
	bound(&r.Source)
	bound(&r.Principal)
	bound(&r.Method)
	bound(&r.NodeID)
	bound(&r.InvokeID)
	bound(&r.Module)
	bound(&r.HostCall)
	bound(&r.Outcome)
	bound(&r.Code)
	bound(&r.Domain)
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := json.Marshal(r)
	if err != nil {
		s.fail()
		return errors.New("audit: record not encoded")
	}
	s.buf = append(append(s.buf[:0], b...), '\n')
	if _, err := s.w.Write(s.buf); err != nil {
		s.fail()
		return ErrUnavailable
	}
	s.written.Add(1)
	s.unhealthy.Store(false)
	return nil
}

func (s *Sink) fail() {
	s.failed.Add(1)
	s.unhealthy.Store(true)
}

func bound(p *string) {
	if len(*p) > MaxField {
		*p = (*p)[:MaxField]
	}
}

// Healthy reports whether the last write succeeded (true before any).
func (s *Sink) Healthy() bool { return s == nil || !s.unhealthy.Load() }

// Admit returns ErrUnavailable when the sink is fail-closed and
// unhealthy; the caller refuses the request (and still writes its
// record: the first that succeeds heals the sink). Otherwise nil.
func (s *Sink) Admit() error {
	if s == nil || !s.failClosed || !s.unhealthy.Load() {
		return nil
	}
	return ErrUnavailable
}

// Probe, on an unhealthy sink, writes one record of method "audit.probe"
// (at most once a second) so that a sink that can write again becomes
// healthy without traffic; it reports Healthy afterwards. /readyz calls it.
func (s *Sink) Probe(source string) bool {
	if s.Healthy() {
		return true
	}
	now := time.Now()
	last := s.lastProbe.Load()
	if now.UnixNano()-last < int64(time.Second) || !s.lastProbe.CompareAndSwap(last, now.UnixNano()) {
		return s.Healthy()
	}
	s.Write(&Record{Time: now, Source: source, Method: "audit.probe", Outcome: "ok"})
	return s.Healthy()
}

// Counts returns the records written and the writes that failed.
func (s *Sink) Counts() (written, failed uint64) {
	if s == nil {
		return 0, 0
	}
	return s.written.Load(), s.failed.Load()
}

// Close closes the file (stdout and writers passed to New stay open).
func (s *Sink) Close() error {
	if s == nil || s.closer == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closer.Close()
}
