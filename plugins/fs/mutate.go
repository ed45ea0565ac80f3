//go:build wasip1

package main

import (
	"math"

	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
	"lemon/plugins/sdk/fs"
	"lemon/protocol"
)

// The mutation methods (spec "File operations"; docs/FS.md, "Writes,
// moves and deletes"): node.fs.write, mkdir and move. This module makes
// the spec's decisions (what revision a write or move expects, what a
// refused expectation means, the move rules) and shapes the payloads; the
// host primitives (fs.write_at, fs.mkdirs, fs.rename) perform the effect
// and compare what they are asked to atomically with it.

// decodeMut strictly decodes params into v with the SDK's codec (no
// reflective JSON in the guest: docs/ABI.md) and runs check; the error is
// always a bounded *protocol.Error.
func decodeMut(req *sdk.Request, v any, check func() *protocol.Error) error {
	if err := req.Decode(v); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	return nil
}

// nodePath checks the nodeId and path of params that have no others to
// check (protocol.ValidateFSMkdir, ValidateFSDeletePreview, on decoded
// params).
func nodePath(nodeID, path string) func() *protocol.Error {
	return func() *protocol.Error {
		if err := protocol.RequireNodeID(nodeID); err != nil {
			return err
		}
		return protocol.ValidateFSPath("path", path)
	}
}

// msRange is the ns interval [lo, hi] of the millisecond revision ms
// (mtimeMs, ns truncated toward the past). ok is false when it does not
// fit in int64 ns (after the year 2262): no file can then match.
func msRange(ms int64) (lo, hi int64, ok bool) {
	if ms < 0 || ms > math.MaxInt64/1_000_000-1 {
		return 0, 0, false
	}
	return ms * 1e6, ms*1e6 + 999_999, true
}

// msOf is the millisecond revision of an mtime in ns (floor, as
// mtimeMs of a stat: seconds*1000 + nanoseconds/1e6).
func msOf(ns int64) int64 {
	ms := ns / 1e6
	if ns%1e6 < 0 {
		ms--
	}
	return ms
}

// precondition reports whether err is a refused expectation of a
// mutation primitive, and its details.field.
func precondition(err error) (field string, ok bool) {
	pe := protocol.AsError(err)
	if pe == nil || pe.DomainCode() != contract.FSPreconditionFailed {
		return "", false
	}
	return pe.Details.Field, true
}

// specError is the spec error domain for a refused expectation, keeping
// the host's outcome flags (a tree that changed during its removal may
// have been partly removed: mutationMayHaveApplied stays true).
func specError(err error, domain string) *protocol.Error {
	e := protocol.FSError(domain)
	if d := protocol.AsError(err).Details; d != nil && d.MutationMayHaveApplied != nil {
		rs := d.RetrySafe != nil && *d.RetrySafe
		e.WithRetry(rs, *d.MutationMayHaveApplied)
	}
	return e
}

// write implements node.fs.write. expectedModifiedAtMs omitted or 0: the
// file must be missing (created O_EXCL); otherwise the file's mtimeMs
// must equal it, and the write leaves it strictly greater (the host sets
// it to the next millisecond when the clock did not get there), so a
// revision is never reused. Any refused expectation is
// revision_conflict and nothing is written; a write expecting an existing
// file creates no parent directories.
func write(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSWriteParams
	if err := decodeMut(req, &p, p.Check); err != nil {
		return nil, err
	}
	blob, ok := req.Blobs["dataBase64"]
	if !ok || p.DataBase64 != nil {
		// The host decodes dataBase64 into a blob before this module runs.
		return nil, protocol.InvalidParams("dataBase64", "dataBase64 is required")
	}
	if blob.Size > protocol.FSMaxWriteBytes {
		return nil, protocol.InvalidParams("dataBase64", "dataBase64 decodes to more than 1048576 bytes")
	}
	args := contract.FSWriteAtArgs{Path: p.Path, Blob: blob.ID, Truncate: true, Mkdirs: p.Mkdirs}
	if p.Offset != nil {
		args.Offset = *p.Offset
	}
	if p.Truncate != nil {
		args.Truncate = *p.Truncate
	}
	if exp := p.ExpectedModifiedAtMs; exp == nil || *exp == 0 {
		args.Expect.Absent = true
	} else {
		lo, hi, ok := msRange(*exp)
		if !ok {
			return nil, protocol.FSError(protocol.DomainRevisionConflict)
		}
		args.Expect.MtimeNsMin, args.Expect.MtimeNsMax = &lo, &hi
		args.MtimeNsAfter = hi + 1
	}
	r, err := fs.WriteAt(args)
	if err != nil {
		if _, ok := precondition(err); ok {
			return nil, specError(err, protocol.DomainRevisionConflict)
		}
		return nil, invalidateOnTimeout(err)
	}
	return &sdk.Result{Payload: protocol.FSWriteResult{Path: r.Path, Offset: args.Offset, BytesWritten: r.BytesWritten,
		Size: r.Size, MtimeMs: msOf(r.MtimeNs)}}, nil
}

// mkdir implements node.fs.mkdir: the directory and its missing parents;
// an existing directory is success (created:true, as the spec's payload
// has it), anything else at the name is already_exists.
func mkdir(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSMkdirParams
	if err := decodeMut(req, &p, func() *protocol.Error { return nodePath(p.NodeID, p.Path)() }); err != nil {
		return nil, err
	}
	r, err := fs.Mkdirs(p.Path)
	if err != nil {
		return nil, invalidateOnTimeout(err)
	}
	if !r.Directory {
		return nil, protocol.FSError(protocol.DomainAlreadyExists)
	}
	return &sdk.Result{Payload: protocol.FSMkdirResult{Path: r.Path, Created: true}}, nil
}

// move implements node.fs.move. The source must still have mtimeMs
// expectedModifiedAtMs (compared by the host on the captured source:
// revision_conflict); without overwrite an existing destination is
// already_exists (RENAME_NOREPLACE), with it the destination is
// replaced. Source and destination naming one entry: already_exists
// without overwrite, else moved (nothing to do) if the revision holds.
func move(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSMoveParams
	if err := decodeMut(req, &p, p.Check); err != nil {
		return nil, err
	}
	exp := *p.ExpectedModifiedAtMs
	lo, hi, ok := msRange(exp)
	if !ok {
		lo, hi = 1, 0 // matches no file
	}
	r, err := fs.Rename(contract.FSRenameArgs{Path: p.Path, Destination: p.Destination, NoReplace: !p.Overwrite,
		Expect: contract.FSExpect{MtimeNsMin: &lo, MtimeNsMax: &hi}})
	if err != nil {
		if field, ok := precondition(err); ok {
			if field == contract.FSFieldDestination {
				return nil, specError(err, protocol.DomainAlreadyExists)
			}
			return nil, specError(err, protocol.DomainRevisionConflict)
		}
		return nil, invalidateOnTimeout(err)
	}
	if r.Same {
		if !p.Overwrite {
			return nil, protocol.FSError(protocol.DomainAlreadyExists)
		}
		if msOf(r.MtimeNs) != exp {
			return nil, protocol.FSError(protocol.DomainRevisionConflict)
		}
	}
	return &sdk.Result{Payload: protocol.FSMoveResult{Path: r.Path, Destination: r.Destination, Moved: true}}, nil
}
