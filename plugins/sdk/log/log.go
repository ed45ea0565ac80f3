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
	"lemon/hostcalls/guestcall"
	"lemon/plugins/sdk"
)

// HostCalls are the imports this package makes, for sdk.Manifest.HostCalls.
var HostCalls = []string{guestcall.LogWrite}

// Write sends one record at level (guestcall.LevelDebug ... LevelError).
// It returns whether the host logged it (false: dropped by the rate
// limit) or the host's error (bad level).
func Write(level, msg string) (bool, error) {
	var out guestcall.LogResult
	err := sdk.Call(logWrite, guestcall.LogArgs{Level: level,
		Message: guestcall.Truncate(msg, guestcall.MaxLogMessageBytes)}, &out)
	return out.Logged, err
}

// Debug, Info, Warn and Error log msg at their level.
func Debug(msg string) { Write(guestcall.LevelDebug, msg) }
func Info(msg string)  { Write(guestcall.LevelInfo, msg) }
func Warn(msg string)  { Write(guestcall.LevelWarn, msg) }
func Error(msg string) { Write(guestcall.LevelError, msg) }
