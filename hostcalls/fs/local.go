package fs

import (
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Inline requests on local filesystems (docs/RATIONALE.md, "fs.open runs
// inline on local filesystems"). A request normally runs on a goroutine
// of its own so that one stuck in a syscall (NFS, FUSE) still answers at
// its deadline; that handoff costs more than the syscalls of a stat. A
// path-resolving read request (inlineOps) runs on the caller's goroutine
// instead while the family can show every path it may touch lies on a
// local disk filesystem: each root's filesystem (fstatfs magic) is a
// local one, and no mount of any other kind lies under a root (read from
// /proc/self/mountinfo, re-read whenever the mount table changes, which
// the kernel signals as POLLPRI on that file).

// localMagics are the statfs f_type values of filesystems whose syscalls
// never wait on a network peer or a user-space server.
var localMagics = map[int64]bool{
	unix.EXT4_SUPER_MAGIC:      true, // also ext2 and ext3
	unix.XFS_SUPER_MAGIC:       true,
	unix.BTRFS_SUPER_MAGIC:     true,
	unix.TMPFS_MAGIC:           true,
	unix.OVERLAYFS_SUPER_MAGIC: true,
	unix.F2FS_SUPER_MAGIC:      true,
	unix.RAMFS_MAGIC:           true,
}

// localTypes are the mountinfo filesystem type names of the same set.
var localTypes = map[string]bool{
	"ext2": true, "ext3": true, "ext4": true, "xfs": true, "btrfs": true,
	"tmpfs": true, "overlay": true, "f2fs": true, "ramfs": true,
}

// inlineOps are the requests that may run inline: reads that resolve a
// path afresh from a root (a handle may outlive a lazy unmount, so
// requests on handles keep the goroutine).
var inlineOps = map[string]bool{"open": true, "stat": true}

// poll is unix.Poll; tests replace it to inject failures.
var poll = unix.Poll

// maxMountinfo bounds the mount table read (bytes); a longer one keeps
// every request on its goroutine.
const maxMountinfo = 4 << 20

// localState says whether requests may run inline. Its zero value (no
// mount table watched) never allows it.
type localState struct {
	mu       sync.Mutex
	watching bool     // watch is open
	watch    int      // /proc/self/mountinfo's descriptor, polled for POLLPRI
	rootsOK  bool     // every root's own filesystem is local (fstatfs)
	ok       bool     // rootsOK and no non-local mount lies under a root
	stale    bool     // a poll failed: re-read the table before trusting ok
	roots    []string // canonical root paths
}

// initLocal classifies the roots; on any failure the family just never
// runs requests inline.
func (f *FS) initLocal() {
	ls := &f.core.local
	ls.rootsOK = true
	for _, r := range f.roots {
		var sfs unix.Statfs_t
		if unix.Fstatfs(r.fd, &sfs) != nil || !localMagics[int64(sfs.Type)] {
			ls.rootsOK = false
		}
		ls.roots = append(ls.roots, r.canon)
	}
	if !ls.rootsOK {
		return
	}
	w, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	ls.watch, ls.watching = w, true
	ls.refresh()
}

// refresh re-reads the mount table. Called with mu held (or before the
// family is shared).
func (ls *localState) refresh() {
	ls.ok = false
	buf, ok := readBounded(ls.watch, maxMountinfo)
	if !ok {
		return
	}
	ls.ok = mountsLocal(string(buf), ls.roots)
}

// inline reports whether a request may run on the caller's goroutine now.
func (ls *localState) inline() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if !ls.watching {
		return false
	}
	pfd := []unix.PollFd{{Fd: int32(ls.watch), Events: unix.POLLPRI}}
	n, err := poll(pfd, 0)
	for err == unix.EINTR { // the runtime's preemption signal
		n, err = poll(pfd, 0)
	}
	if err != nil {
		// A change may have gone unseen: re-read the table on the next
		// request, which decides afresh.
		ls.ok, ls.stale = false, true
		return false
	}
	if ls.stale || n > 0 && pfd[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0 {
		ls.stale = false
		ls.refresh()
	}
	return ls.ok
}

func (ls *localState) close() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.watching {
		unix.Close(ls.watch)
		ls.watching, ls.ok = false, false
	}
}

// mountsLocal reports whether no mount point at or under any of roots
// (canonical absolute paths) has a filesystem type outside localTypes, given
// the text of /proc/self/mountinfo. A line it cannot parse answers false.
func mountsLocal(mountinfo string, roots []string) bool {
	for _, line := range strings.Split(mountinfo, "\n") {
		if line == "" {
			continue
		}
		fields := strings.Fields(line)
		sep := -1
		for i, fl := range fields {
			if fl == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 5 || sep+1 >= len(fields) {
			return false
		}
		mp, ok := unescapeMount(fields[4])
		if !ok {
			return false
		}
		fstype := fields[sep+1]
		for _, r := range roots {
			if (mp == r || strings.HasPrefix(mp, strings.TrimSuffix(r, "/")+"/")) && !localTypes[fstype] {
				return false
			}
		}
	}
	return true
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, …).
func unescapeMount(s string) (string, bool) {
	if !strings.Contains(s, `\`) {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			if i+4 > len(s) {
				return "", false
			}
			v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
			if err != nil {
				return "", false
			}
			b.WriteByte(byte(v))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String(), true
}

// readBounded reads fd from offset 0 to its end; ok is false on an error
// or when it holds more than max bytes.
func readBounded(fd, max int) (buf []byte, ok bool) {
	chunk := make([]byte, 64<<10)
	for {
		n, err := unix.Pread(fd, chunk, int64(len(buf)))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, false
		}
		if n == 0 {
			return buf, true
		}
		buf = append(buf, chunk[:n]...)
		if len(buf) > max {
			return nil, false
		}
	}
}
