package fs

import (
	"errors"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"lemon/protocol"
)

// errNotAllowed and friends are the classifications the walker returns.
func errNotAllowed() error { return protocol.FSError(protocol.DomainPathNotAllowed) }
func errNotFound() error   { return protocol.FSError(protocol.DomainNotFound) }
func errNotDir() error     { return protocol.FSError(protocol.DomainNotDirectory) }
func errNotRegular() error { return protocol.FSError(protocol.DomainNotRegularFile) }
func errBusy() error       { return protocol.FSError(protocol.DomainFilesystemBusy) }

// mapErrno classifies an OS error into a bounded protocol error. The OS
// text is dropped: it may hold a path.
func mapErrno(err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	var en unix.Errno
	if !errors.As(err, &en) {
		return protocol.FSError(protocol.DomainFilesystemError)
	}
	switch en {
	case unix.ENOENT:
		return errNotFound()
	case unix.ENOTDIR:
		return errNotDir()
	case unix.ELOOP: // a symlink appeared where O_NOFOLLOW refuses it
		return errNotAllowed()
	case unix.EACCES, unix.EPERM:
		return protocol.FSError(protocol.DomainPermissionDenied)
	case unix.EEXIST, unix.ENOTEMPTY:
		return protocol.FSError(protocol.DomainAlreadyExists)
	case unix.EISDIR, unix.ENXIO, unix.ENODEV:
		return errNotRegular()
	case unix.ENAMETOOLONG:
		return protocol.FSError(protocol.DomainNameTooLong)
	case unix.EXDEV:
		return protocol.FSError(protocol.DomainCrossDevice)
	case unix.EMFILE, unix.ENFILE:
		return errBusy()
	}
	return protocol.FSError(protocol.DomainFilesystemError)
}

// Descriptor accounting: every descriptor a request opens counts against
// lim.descriptors; exhaustion is filesystem_busy, never an unbounded cache.

func (f *FS) reserveFD() error {
	if f.fdsInUse.Add(1) > f.lim.descriptors {
		f.fdsInUse.Add(-1)
		return errBusy()
	}
	return nil
}

func (f *FS) closeFD(fd int) {
	unix.Close(fd)
	f.fdsInUse.Add(-1)
}

// openat2Supported is cleared the first time openat2 reports ENOSYS.
var openat2Supported atomic.Bool

func init() { openat2Supported.Store(true) }

// openAt opens one component name (never a multi-component path) relative
// to dir with O_NOFOLLOW|O_CLOEXEC. Where openat2 exists it also asks the
// kernel for RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS, a
// second fence should a future caller pass more than one component.
func (f *FS) openAt(dir int, name string, flags int, mode uint32) (int, error) {
	if name != "." && strings.IndexByte(name, '/') >= 0 {
		return -1, errNotAllowed()
	}
	if err := f.reserveFD(); err != nil {
		return -1, err
	}
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	eagain := 0
	for {
		var fd int
		var err error
		if openat2Supported.Load() {
			how := unix.OpenHow{Flags: uint64(flags), Mode: uint64(mode),
				Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
			if flags&unix.O_CREAT == 0 {
				how.Mode = 0
			}
			fd, err = unix.Openat2(dir, name, &how)
			if err == unix.ENOSYS {
				openat2Supported.Store(false)
				continue
			}
		} else {
			fd, err = unix.Openat(dir, name, flags, mode)
		}
		if err == unix.EINTR {
			continue
		}
		// openat2 with RESOLVE_BENEATH answers EAGAIN when any rename ran
		// on the system during the lookup; retry a bounded number of times.
		if err == unix.EAGAIN && eagain < 64 {
			eagain++
			continue
		}
		if err == unix.EAGAIN {
			f.fdsInUse.Add(-1)
			return -1, errBusy()
		}
		if err != nil {
			f.fdsInUse.Add(-1)
			return -1, err
		}
		return fd, nil
	}
}

// lexical turns a request path into absolute lexical components: relative
// paths are taken from the default cwd. `.` and empty components are
// dropped; `..` is refused even when it would stay inside a root.
func (f *FS) lexical(p string) ([]string, error) {
	if err := protocol.ValidateFSPath("path", p); err != nil {
		return nil, err
	}
	var comps []string
	if !strings.HasPrefix(p, "/") {
		comps = append(comps, f.cwd...)
	}
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return nil, errNotAllowed()
		}
		if len(c) > protocol.FSMaxNameBytes {
			return nil, protocol.FSError(protocol.DomainNameTooLong)
		}
		comps = append(comps, c)
	}
	return comps, nil
}

// findRoot returns the allowed root whose canonical path (or configured
// spelling) is the longest component-wise prefix of comps, and the rest.
func (f *FS) findRoot(comps []string) (*root, []string) {
	var best *root
	bestLen := -1
	for _, r := range f.roots {
		for _, pre := range append([][]string{r.comps}, r.aliases...) {
			if len(pre) > bestLen && hasPrefixComps(comps, pre) {
				best, bestLen = r, len(pre)
			}
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, comps[bestLen:]
}

// isRootIdentity reports whether (dev, ino) is an allowed root.
func (f *FS) isRootIdentity(st *unix.Stat_t) bool {
	for _, r := range f.roots {
		if r.dev == st.Dev && r.ino == st.Ino {
			return true
		}
	}
	return false
}

// target is a resolved path: the directory that holds it (an O_PATH
// descriptor reached from a pinned root without following any symlink) and
// its final name there. For an allowed root itself, dir is the root's
// pinned descriptor and name is ".".
type target struct {
	root   *root
	dir    int
	owned  bool // dir must be closed by close
	name   string
	canon  []string // canonical absolute components of the target
	exists bool
	st     unix.Stat_t // lstat of the target when exists
	isRoot bool
}

func (t *target) path() string { return joinAbs(t.canon) }

func (f *FS) closeTarget(t *target) {
	if t != nil && t.owned {
		f.closeFD(t.dir)
		t.owned = false
	}
}

type walkOpts struct {
	// followFinal follows a symlink in the last component (every method
	// acts on an accepted symlink's canonical target).
	followFinal bool
	// mkdirs creates missing intermediate directories.
	mkdirs bool
}

// walk resolves lexical components to a target, one component at a time
// from a pinned root with O_NOFOLLOW. A symlink is read with one
// readlinkat; its target (made absolute against the canonical path walked
// so far, with `..` applied lexically to that canonical path) replaces the
// walked prefix and the walk restarts from the root that admits it. Nothing
// outside an allowed root is ever stat'ed, read or opened.
func (f *FS) walk(comps []string, o walkOpts) (*target, error) {
	links := 0
	var linkBuf [protocol.FSMaxPathBytes + 1]byte
restart:
	r, rest := f.findRoot(comps)
	if r == nil {
		return nil, errNotAllowed()
	}
	dir, owned := r.fd, false
	canon := append(make([]string, 0, len(comps)), r.comps...)
	release := func() {
		if owned {
			f.closeFD(dir)
			owned = false
		}
	}
	retries := 0
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		last := i == len(rest)-1
		var st unix.Stat_t
		err := unix.Fstatat(dir, c, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.ENOENT {
			if last {
				return &target{root: r, dir: dir, owned: owned, name: c, canon: append(canon, c)}, nil
			}
			if o.mkdirs && retries < 8 {
				retries++
				if err := unix.Mkdirat(dir, c, 0o777); err != nil && err != unix.EEXIST {
					release()
					return nil, mapErrno(err)
				}
				i-- // stat it again: it may now exist as anything
				continue
			}
			release()
			return nil, errNotFound()
		}
		if err != nil {
			release()
			return nil, mapErrno(err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			if last && !o.followFinal {
				return &target{root: r, dir: dir, owned: owned, name: c, canon: append(canon, c), exists: true, st: st}, nil
			}
			links++
			if links > f.lim.symlinks {
				release()
				return nil, errNotAllowed()
			}
			n, err := unix.Readlinkat(dir, c, linkBuf[:])
			if err == unix.EINVAL && retries < 8 {
				// No longer a symlink: it was replaced since the lstat.
				// Classify the component again.
				retries++
				links--
				i--
				continue
			}
			if err != nil {
				release()
				return nil, mapErrno(err)
			}
			if n == 0 || n > protocol.FSMaxPathBytes {
				release()
				return nil, errNotAllowed()
			}
			link := string(linkBuf[:n])
			var next []string
			if !strings.HasPrefix(link, "/") {
				next = append(next, canon...)
			}
			for _, lc := range strings.Split(link, "/") {
				switch lc {
				case "", ".":
				case "..":
					if len(next) > 0 {
						next = next[:len(next)-1]
					}
				default:
					next = append(next, lc)
				}
			}
			comps = append(next, rest[i+1:]...)
			release()
			goto restart
		case unix.S_IFDIR:
			if last {
				return &target{root: r, dir: dir, owned: owned, name: c, canon: append(canon, c), exists: true, st: st}, nil
			}
			nfd, err := f.openAt(dir, c, unix.O_PATH|unix.O_DIRECTORY, 0)
			if err != nil {
				release()
				return nil, mapErrno(err)
			}
			release()
			dir, owned = nfd, true
			canon = append(canon, c)
			retries = 0 // the race budget is per component, not per path
		default:
			if last {
				return &target{root: r, dir: dir, owned: owned, name: c, canon: append(canon, c), exists: true, st: st}, nil
			}
			release()
			return nil, errNotDir()
		}
	}
	// No components left: the target is the root itself.
	var st unix.Stat_t
	if err := unix.Fstat(dir, &st); err != nil {
		release()
		return nil, mapErrno(err)
	}
	return &target{root: r, dir: dir, owned: owned, name: ".", canon: canon, exists: true, st: st, isRoot: !owned}, nil
}

// resolve validates p and walks it.
func (f *FS) resolve(p string, o walkOpts) (*target, error) {
	comps, err := f.lexical(p)
	if err != nil {
		return nil, err
	}
	return f.walk(comps, o)
}
