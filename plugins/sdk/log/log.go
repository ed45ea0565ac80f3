// Package log writes guest log records through the log.write host call
// (docs/PLUGINS.md, "Logging, panics, blobs and settings"). A record goes
// to the node's log tagged with the module, method and invokeId; a
// message longer than guestcall.MaxLogMessageBytes is cut at a rune
// boundary first, and a record over the module's rate limit is dropped
// by the host without waiting. Logging never fails the caller: the
// helpers return nothing, and Write reports what happened.
//
// A module that logs lists log.write in its manifest (HostCalls below).
// Log no request content: paths, file bytes, argv and names are the
// caller's data (docs/THREAT_MODEL.md).
package log

import (
	"bytes"

	"lemon/hostcalls/guestcall"
	"lemon/plugins/sdk"
)

// HostCalls are the imports this package makes, for sdk.Manifest.HostCalls.
var HostCalls = []string{guestcall.LogWrite}

// Write sends one record at level (guestcall.LevelDebug ... LevelError).
// It returns whether the host logged it (false: dropped by the rate
// limit) or the host's error (bad level).
//
// The args are encoded by hand and the result read without a JSON
// decoder: reflection-based JSON costs the guest about 1 µs a byte, which
// would make a log call several times dearer than the host's work.
func Write(level, msg string) (bool, error) {
	msg = guestcall.Truncate(msg, guestcall.MaxLogMessageBytes)
	args := make([]byte, 0, len(msg)+40)
	args = append(args, `{"level":`...)
	args = appendJSONString(args, level)
	args = append(args, `,"message":`...)
	args = appendJSONString(args, msg)
	args = append(args, '}')
	res, err := sdk.CallBytes(logWrite, args)
	if err != nil {
		return false, err
	}
	return bytes.HasPrefix(res, []byte(`{"logged":true`)), nil
}

// appendJSONString appends s as a JSON string: quote, backslash and
// control characters escaped, everything else as is (the host decodes
// invalid UTF-8 to U+FFFD, as encoding/json would have encoded it).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// Debug, Info, Warn and Error log msg at their level.
func Debug(msg string) { Write(guestcall.LevelDebug, msg) }
func Info(msg string)  { Write(guestcall.LevelInfo, msg) }
func Warn(msg string)  { Write(guestcall.LevelWarn, msg) }
func Error(msg string) { Write(guestcall.LevelError, msg) }
