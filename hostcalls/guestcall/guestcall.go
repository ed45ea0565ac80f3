// Package guestcall holds the names, argument and result shapes and
// limits of the host calls plugin authors use for logging, blob bytes and
// per-module settings (docs/ABI.md, docs/PLUGINS.md "Logging, panics,
// blobs and settings"). It is stdlib-only: the host family
// (lemon/hostcalls/guest) and the guest SDK (lemon/plugins/sdk/log, blob,
// config) both import it.
package guestcall

import (
	"fmt"
	"lemon/hostcalls/contract"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Host-call names. None needs a capability (hostcalls.CapNone): a module
// lists the ones it imports in its manifest's HostCalls and nothing else.
const (
	// LogWrite writes one guest log record: LogArgs → LogResult.
	LogWrite = "log.write"
	// BlobRead copies a byte range of a non-secret blob into guest
	// memory: BlobReadArgs → the raw bytes (not JSON).
	BlobRead = "blob.read"
	// BlobSHA256 hashes a non-secret blob on the host: BlobArgs → Digest.
	BlobSHA256 = "blob.sha256"
	// HashUpdate feeds a non-secret blob to a running SHA-256 kept on the
	// host: HashUpdateArgs → HashState.
	HashUpdate = "blob.hash_update"
	// HashSum finishes a running SHA-256: HashSumArgs → Digest.
	HashSum = "blob.hash_sum"
	// BlobFree forgets a blob before the invocation ends: BlobArgs → {}.
	BlobFree = "blob.free"
	// ConfigGet returns the calling module's [modules.<family>] table of
	// the worker policy: {} → Settings.
	ConfigGet = "config.get"
)

// All lists every host call of the family, in a stable order.
var All = []string{LogWrite, BlobRead, BlobSHA256, HashUpdate, HashSum, BlobFree, ConfigGet}

// Limits.
const (
	// MaxLogMessageBytes is the longest log message in bytes (UTF-8). A
	// longer one is refused INVALID_PARAMS by the host; the SDK's log
	// helpers truncate to it at a rune boundary before sending.
	MaxLogMessageBytes = 2048
	// MaxBlobRead is the most bytes one blob.read returns (1 MiB).
	MaxBlobRead = 1 << 20
	// LogPerSecond and LogBurst are each module's guest-log token bucket:
	// records beyond it are dropped and counted, never waited for.
	LogPerSecond = 20
	LogBurst     = 100
)

// Log levels accepted by log.write.
const (
	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
)

// The shapes of the family's arguments and results live in the contract
// package both sides compile (docs/HOSTCALLS.md); these are their names
// here.
type (
	LogArgs        = contract.LogArgs
	LogResult      = contract.LogResult
	BlobArgs       = contract.BlobArgs
	BlobReadArgs   = contract.BlobReadArgs
	Digest         = contract.Digest
	HashUpdateArgs = contract.HashUpdateArgs
	HashState      = contract.HashState
	HashSumArgs    = contract.HashSumArgs
	Settings       = contract.Settings
)

// SafeText returns s with every control or format character (C0, DEL,
// C1, bidi overrides, zero-width marks) and every invalid UTF-8 byte
// written as an escape (\n, \t, \x1b, \u202e), and then cut to at most
// max bytes at a rune boundary, for a log record that shows on one line
// and cannot rewrite a terminal.
func SafeText(s string, max int) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && n == 1:
			piece = fmt.Sprintf(`\x%02x`, s[i])
		case r == '\\':
			piece = `\\`
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029':
			q := strconv.QuoteRuneToASCII(r)
			piece = q[1 : len(q)-1]
		default:
			piece = s[i : i+n]
		}
		if b.Len()+len(piece) > max {
			break
		}
		b.WriteString(piece)
		i += n
	}
	return b.String()
}

// Truncate cuts s to at most max bytes at a rune boundary.
func Truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
