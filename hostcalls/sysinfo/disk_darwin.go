package sysinfo

import "golang.org/x/sys/unix"

// diskFigures are POSIX df's figures for a statfs result, in bytes: the
// size (f_blocks) and Available (f_bavail, what an unprivileged writer can
// still use), in units of f_bsize, the fundamental block size on Darwin.
func diskFigures(st *unix.Statfs_t) (total, avail uint64) {
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize)
}
