package sysinfo

import "golang.org/x/sys/unix"

// diskFigures are POSIX df's figures for a statfs result: the size
// (f_blocks) and Available (f_bavail, what an unprivileged writer can
// still use), and their unit f_bsize, the fundamental block size on
// Darwin.
func diskFigures(st *unix.Statfs_t) (blocks, avail, unit uint64) {
	return st.Blocks, st.Bavail, uint64(st.Bsize)
}
