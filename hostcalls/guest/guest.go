// Package guest is the host-call family plugin authors use for their own
// needs rather than a node effect: guest logging (log.write), reading and
// hashing non-secret blobs (blob.read, blob.sha256, blob.hash_update,
// blob.hash_sum, blob.free) and the module's own settings from the
// worker policy (config.get). Names, shapes and limits are in
// lemon/hostcalls/guestcall; docs/PLUGINS.md, "Logging, panics, blobs and
// settings", and docs/ABI.md describe them.
//
// None of these calls needs a capability (hostcalls.CapNone): each stays
// inside the invocation (its own blobs, its own settings) or writes one
// bounded, rate-limited, escaped record to the node's log. A module lists
// the ones it imports in its manifest's HostCalls.
package guest

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash"
	"lemon/hostcalls/contract"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"lemon/hostcalls"
	"lemon/hostcalls/guestcall"
	"lemon/protocol"
)

// Config configures the family.
type Config struct {
	// Logger receives guest log records; nil drops them (they are still
	// rate-limited and counted).
	Logger *slog.Logger
	// Settings maps a module family to its [modules.<family>] table of the
	// worker policy (policies.Worker.Modules). config.get hands a module
	// its own family's table only.
	Settings map[string]map[string]any
	// LogPerSecond and LogBurst size each module's log token bucket;
	// 0 takes guestcall.LogPerSecond and guestcall.LogBurst.
	LogPerSecond float64
	LogBurst     int
	// Now is the rate limiter's clock; nil = time.Now (tests).
	Now func() time.Time
}

// Guest is the family. It is safe for concurrent use.
type Guest struct {
	cfg Config

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
	dropped  map[string]uint64 // by module, since the node started
	unshown  map[string]uint64 // by module, dropped since its last record
}

// New returns the family.
func New(cfg Config) *Guest {
	if cfg.LogPerSecond <= 0 {
		cfg.LogPerSecond = guestcall.LogPerSecond
	}
	if cfg.LogBurst <= 0 {
		cfg.LogBurst = guestcall.LogBurst
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Guest{cfg: cfg, limiters: map[string]*rate.Limiter{},
		dropped: map[string]uint64{}, unshown: map[string]uint64{}}
}

// Table returns the family's host calls, all under hostcalls.CapNone and
// audit class meta (no node state changes):
//
//	log.write        {level, message}         → guestcall.LogResult
//	blob.read        {blob, offset, length}   → raw bytes (not JSON)
//	blob.sha256      {blob}                   → guestcall.Digest
//	blob.hash_update {state, blob, free}      → guestcall.HashState
//	blob.hash_sum    {state}                  → guestcall.Digest
//	blob.free        {blob}                   → {}
//	config.get       {}                       → guestcall.Settings
//
// Errors: INVALID_PARAMS naming the field (bad level, message longer than
// guestcall.MaxLogMessageBytes, unknown blob, offset or length out of
// range, malformed hash state); FORBIDDEN for a secret blob.
func (g *Guest) Table() hostcalls.Table {
	none, meta := hostcalls.CapNone, hostcalls.AuditMeta
	blobErrs := []hostcalls.ErrorSpec{
		hostcalls.Err(errSecretBlob, "the blob is secret (an input blob declared secret, or of a method needing secrets)"),
		hostcalls.Err(errNoBlob, "blob names no blob of this invocation"),
	}
	return hostcalls.Table{
		hostcalls.DefineRaw(contract.LogWriteCall.Spec(), none, meta, g.hcLog,
			hostcalls.Err(errMessageTooLong, "message is longer than 2,048 bytes, or level is not debug, info, warn or error")),
		hostcalls.DefineRaw(contract.BlobReadCall.Spec(), none, meta, hcBlobRead, append(blobErrs,
			hostcalls.Err(protocol.InvalidParams("offset", ""), "offset is outside 0 to the blob's size, or length outside 1 to 1 MiB"))...),
		hostcalls.DefineRaw(contract.BlobSHA256Call.Spec(), none, meta, hcBlobSHA256, blobErrs...),
		hostcalls.DefineRaw(contract.HashUpdateCall.Spec(), none, meta, hcHashUpdate, append(blobErrs,
			hostcalls.Err(errBadState, "state names no hash state of this invocation"))...),
		hostcalls.DefineRaw(contract.HashSumCall.Spec(), none, meta, hcHashSum,
			hostcalls.Err(errBadState, "state names no hash state of this invocation")),
		hostcalls.DefineRaw(contract.BlobFreeCall.Spec(), none, meta, hcBlobFree, blobErrs[1]),
		hostcalls.DefineRaw(contract.ConfigGetCall.Spec(), none, meta, g.hcConfig),
	}
}

// Dropped returns how many log records of module the rate limit dropped.
func (g *Guest) Dropped(module string) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dropped[module]
}

var levels = map[string]slog.Level{
	guestcall.LevelDebug: slog.LevelDebug,
	guestcall.LevelInfo:  slog.LevelInfo,
	guestcall.LevelWarn:  slog.LevelWarn,
	guestcall.LevelError: slog.LevelError,
}

var errMessageTooLong = protocol.InvalidParams("message",
	"message is longer than "+strconv.Itoa(guestcall.MaxLogMessageBytes)+" bytes")

func (g *Guest) hcLog(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a guestcall.LogArgs
	if perr := protocol.DecodeParams(args, &a); perr != nil {
		return nil, perr
	}
	level, ok := levels[a.Level]
	if !ok {
		return nil, protocol.InvalidParams("level", "level must be debug, info, warn or error")
	}
	if len(a.Message) > guestcall.MaxLogMessageBytes {
		return nil, errMessageTooLong
	}
	module := call.Module()
	g.mu.Lock()
	l, ok := g.limiters[module]
	if !ok {
		l = rate.NewLimiter(rate.Limit(g.cfg.LogPerSecond), g.cfg.LogBurst)
		g.limiters[module] = l
	}
	if !l.AllowN(g.cfg.Now(), 1) {
		g.dropped[module]++
		n := g.dropped[module]
		g.unshown[module]++
		g.mu.Unlock()
		return json.Marshal(guestcall.LogResult{Logged: false, Dropped: n})
	}
	unshown, total := g.unshown[module], g.dropped[module]
	g.unshown[module] = 0
	g.mu.Unlock()
	if g.cfg.Logger != nil {
		attrs := []slog.Attr{
			slog.String("module", module),
			slog.String("method", call.Method()),
			slog.String("invokeId", guestcall.SafeText(call.Invocation().InvokeID, 128)),
			slog.String("message", guestcall.SafeText(a.Message, 6*guestcall.MaxLogMessageBytes)),
		}
		if unshown > 0 {
			attrs = append(attrs, slog.Uint64("droppedBefore", unshown))
		}
		g.cfg.Logger.LogAttrs(context.WithoutCancel(ctx), level, "execution_node.guest_log", attrs...)
	}
	return json.Marshal(guestcall.LogResult{Logged: true, Dropped: total})
}

var (
	errSecretBlob = protocol.Errorf(protocol.CodeForbidden, "the blob is secret: its bytes never reach a module")
	errNoBlob     = protocol.InvalidParams("blob", "blob is not a blob of this invocation")
)

// publicBlob returns the bytes of a non-secret blob, refusing a secret one
// FORBIDDEN and any blob when the Call cannot say which are secret.
func publicBlob(call hostcalls.Call, id uint32, field string) ([]byte, *protocol.Error) {
	k, ok := call.(hostcalls.BlobKeeper)
	if !ok {
		return nil, errSecretBlob
	}
	if k.BlobSecret(id) {
		return nil, errSecretBlob
	}
	b, ok := call.Blob(id)
	if !ok {
		return nil, protocol.InvalidParams(field, field+" is not a blob of this invocation")
	}
	return b, nil
}

func hcBlobRead(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a guestcall.BlobReadArgs
	if perr := protocol.DecodeParams(args, &a); perr != nil {
		return nil, perr
	}
	b, perr := publicBlob(call, a.Blob, "blob")
	if perr != nil {
		return nil, perr
	}
	if a.Offset < 0 || a.Offset > int64(len(b)) {
		return nil, protocol.InvalidParams("offset", "offset must be between 0 and the blob's size")
	}
	if a.Length < 1 || a.Length > guestcall.MaxBlobRead {
		return nil, protocol.InvalidParams("length", "length must be between 1 and "+strconv.Itoa(guestcall.MaxBlobRead))
	}
	end := min(a.Offset+a.Length, int64(len(b)))
	out := make([]byte, end-a.Offset) // never nil: an empty read is 0 bytes, not "{}"
	copy(out, b[a.Offset:end])
	return out, nil
}

func hcBlobSHA256(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a guestcall.BlobArgs
	if perr := protocol.DecodeParams(args, &a); perr != nil {
		return nil, perr
	}
	b, perr := publicBlob(call, a.Blob, "blob")
	if perr != nil {
		return nil, perr
	}
	sum := sha256.Sum256(b)
	return json.Marshal(guestcall.Digest{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(b))})
}

// A hash state blob is the byte count (8 bytes, big-endian) followed by
// the marshalled crypto/sha256 state. It is an ordinary blob: a guest that
// forges one only gets a wrong digest of its own bytes.
func loadState(call hostcalls.Call, id uint32) (hash.Hash, int64, *protocol.Error) {
	h := sha256.New()
	if id == 0 {
		return h, 0, nil
	}
	b, perr := publicBlob(call, id, "state")
	if perr != nil {
		return nil, 0, perr
	}
	if len(b) < 8 {
		return nil, 0, errBadState
	}
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(b[8:]); err != nil {
		return nil, 0, errBadState
	}
	n := int64(binary.BigEndian.Uint64(b[:8]))
	if n < 0 {
		return nil, 0, errBadState
	}
	return h, n, nil
}

var errBadState = protocol.InvalidParams("state", "state is not a hash state")

func hcHashUpdate(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a guestcall.HashUpdateArgs
	if perr := protocol.DecodeParams(args, &a); perr != nil {
		return nil, perr
	}
	b, perr := publicBlob(call, a.Blob, "blob")
	if perr != nil {
		return nil, perr
	}
	h, n, perr := loadState(call, a.State)
	if perr != nil {
		return nil, perr
	}
	h.Write(b)
	n += int64(len(b))
	st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "internal error")
	}
	k := call.(hostcalls.BlobKeeper) // publicBlob checked it
	if a.State != 0 {
		k.DropBlob(a.State)
	}
	if a.Free {
		k.DropBlob(a.Blob)
	}
	id := call.PutBlob(append(binary.BigEndian.AppendUint64(nil, uint64(n)), st...))
	return json.Marshal(guestcall.HashState{State: id, Size: n})
}

func hcHashSum(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a guestcall.HashSumArgs
	if perr := protocol.DecodeParams(args, &a); perr != nil {
		return nil, perr
	}
	h, n, perr := loadState(call, a.State)
	if perr != nil {
		return nil, perr
	}
	if a.State != 0 {
		call.(hostcalls.BlobKeeper).DropBlob(a.State)
	}
	return json.Marshal(guestcall.Digest{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n})
}

func hcBlobFree(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a guestcall.BlobArgs
	if perr := protocol.DecodeParams(args, &a); perr != nil {
		return nil, perr
	}
	k, ok := call.(hostcalls.BlobKeeper)
	if !ok || !k.DropBlob(a.Blob) {
		return nil, errNoBlob
	}
	return []byte("{}"), nil
}

func (g *Guest) hcConfig(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a struct{}
	if perr := protocol.DecodeParams(args, &a); perr != nil {
		return nil, perr
	}
	s := g.cfg.Settings[call.Module()]
	if s == nil {
		s = map[string]any{}
	}
	b, err := json.Marshal(guestcall.Settings{Settings: s})
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "internal error")
	}
	return b, nil
}
