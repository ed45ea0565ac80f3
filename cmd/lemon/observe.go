package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"

	"lemon/audit"
	"lemon/worker"
)

// obsFlags are the observability flags of controller, node join and dev
// (docs/OPERATIONS.md): log format and level, the audit sink, and (nodes)
// the metrics listener.
type obsFlags struct {
	logFormat, logLevel string
	auditFile           string
	auditFailClosed     bool
	metricsListen       string
}

// addObsFlags registers the flags; which says which ones: "controller",
// "node" or "dev".
func addObsFlags(fs *flag.FlagSet, which, defaultLevel string) *obsFlags {
	f := &obsFlags{}
	fs.StringVar(&f.logFormat, "log-format", "text", "log format on stderr: text or json")
	if which != "dev" { // dev declares its own --log-level
		fs.StringVar(&f.logLevel, "log-level", defaultLevel, "debug, info, warn or error: the least severe level logged")
	}
	fs.StringVar(&f.auditFile, "audit-file", "", "write audit records (JSON Lines) to this file, rotated at 100 MiB keeping 10; - for stdout")
	if which != "node" {
		fs.BoolVar(&f.auditFailClosed, "audit-fail-closed", false, "refuse operator requests while the audit file cannot be written (needs --audit-file)")
	}
	if which != "controller" {
		fs.StringVar(&f.metricsListen, "metrics-listen", "", "serve the node's /metrics, /healthz and /readyz on this address (e.g. 127.0.0.1:9464)")
	}
	return f
}

// check validates the flag values; the error is a usage error (exit 2).
func (f *obsFlags) check() error {
	if f.logFormat != "text" && f.logFormat != "json" {
		return errors.New("--log-format must be text or json")
	}
	if f.logLevel != "" {
		var l slog.Level
		if l.UnmarshalText([]byte(f.logLevel)) != nil {
			return errors.New("--log-level must be debug, info, warn or error")
		}
	}
	if f.auditFailClosed && f.auditFile == "" {
		return errors.New("--audit-fail-closed needs --audit-file")
	}
	return nil
}

// logger builds the slog logger on w for level (a checked level name).
func (f *obsFlags) logger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	l.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: l}
	if f.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// notice writes one lifecycle line of controller, node join or dev (the
// state directory, the listen address, the metrics address, start and
// stop; docs/OPERATIONS.md, "Logs"). In text mode it is text, printed as
// is ("lemon controller: listening on ws://127.0.0.1:7777/ws"); in json
// mode it is one JSON record at level INFO with msg and attrs (and "cmd",
// the command), written whatever --log-level says, as the text line is.
func (f *obsFlags) notice(w io.Writer, cmd, text, msg string, attrs ...any) {
	if f.logFormat != "json" {
		fmt.Fprintln(w, cmd+": "+text)
		return
	}
	slog.New(slog.NewJSONHandler(w, nil)).Info(msg, append([]any{"cmd", cmd}, attrs...)...)
}

// openAudit opens the audit sink, or returns nil without --audit-file.
func (f *obsFlags) openAudit() (*audit.Sink, error) {
	if f.auditFile == "" {
		return nil, nil
	}
	return audit.Open(audit.Config{File: f.auditFile, FailClosed: f.auditFailClosed})
}

// serveNodeMetrics listens on --metrics-listen and serves the node's
// metrics and health until ctx ends; nothing without the flag.
func (f *obsFlags) serveNodeMetrics(ctx context.Context, reg *prometheus.Registry, ready func() []string, log *slog.Logger) (net.Addr, error) {
	if f.metricsListen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", f.metricsListen)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s for metrics: %v", f.metricsListen, listenReason(err))
	}
	go worker.ServeMetrics(ctx, ln, reg, ready, log)
	return ln.Addr(), nil
}
