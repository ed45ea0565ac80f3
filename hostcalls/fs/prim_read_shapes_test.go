package fs

import (
	"sort"
	"unicode/utf8"

	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// Stat and List are the node.fs.stat and node.fs.list results (without
// MIME types) built from the read primitives exactly as the fs module
// builds them (plugins/fs/read.go), for the confinement, race and
// operation tests of this package, which check them through the real
// walker, fs.open, fs.readdir and fs.statat code.

// Stat opens p (following a final symlink) and returns its stat fields.
func (f *FS) Stat(p string) (*protocol.FSStat, error) {
	h, res, err := f.open(p, false)
	if err != nil {
		return nil, err
	}
	defer f.closeFD(h.fd)
	st := &res.Stat
	return &protocol.FSStat{Path: res.Path, Type: typeName(st.Mode), Size: st.Size, MtimeMs: st.MtimeSec*1000 + st.MtimeNsec/1e6,
		Mode: st.Mode, Readable: st.Readable, Writable: st.Writable}, nil
}

// List opens directory p, reads every name (fs.readdir batches of 4 KiB),
// keeps the visible ones in byte order, at most 500 (truncated past), and
// lstat's the UTF-8 ones (fs.statat).
func (f *FS) List(p string, showHidden bool) (*protocol.FSListResult, error) {
	h, res, err := f.open(p, false)
	if err != nil {
		return nil, err
	}
	defer f.closeFD(h.fd)
	if !isDir(&h.st) {
		return nil, errNotDir()
	}
	var names []string
	for eof := false; !eof; {
		b, err := readDir(h, 4096, false, false)
		if err != nil {
			return nil, err
		}
		if eof, err = contract.ParseFSReadDir(b, func(e contract.FSDirEntry) {
			if showHidden || e.Name[0] != '.' {
				names = append(names, string(e.Name))
			}
		}); err != nil {
			return nil, err
		}
	}
	sort.Strings(names)
	out := &protocol.FSListResult{Path: res.Path, Entries: []protocol.FSListEntry{}, Limit: protocol.FSListLimit}
	if len(names) > protocol.FSListLimit {
		names, out.Truncated = names[:protocol.FSListLimit], true
	}
	var valid []string
	for _, n := range names {
		if utf8.ValidString(n) {
			valid = append(valid, n)
		}
	}
	var stats []*contract.FSRawStat
	var codes []string
	if len(valid) > 0 {
		b, err := statAt(h, valid)
		if err != nil {
			return nil, err
		}
		contract.ParseFSStatAt(b, func(st *contract.FSRawStat, code string) {
			if st != nil {
				c := *st
				st = &c
			}
			stats, codes = append(stats, st), append(codes, code)
		})
	}
	k := 0
	for _, n := range names {
		if !utf8.ValidString(n) {
			out.Entries = append(out.Entries, protocol.FSListEntry{Name: n, Error: protocol.DomainInvalidPath})
			continue
		}
		if st := stats[k]; st != nil {
			out.Entries = append(out.Entries, protocol.FSListEntry{Name: n, FSEntryStat: &protocol.FSEntryStat{Type: typeName(st.Mode),
				Size: st.Size, MtimeMs: st.MtimeSec*1000 + st.MtimeNsec/1e6, Mode: st.Mode, Readable: st.Readable, Writable: st.Writable}})
		} else {
			out.Entries = append(out.Entries, protocol.FSListEntry{Name: n, Error: codes[k]})
		}
		k++
	}
	return out, nil
}
