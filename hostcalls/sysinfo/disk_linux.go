package sysinfo

import "golang.org/x/sys/unix"

// diskFigures are POSIX df's figures for a statfs result: the size
// (f_blocks) and Available (f_bavail, what an unprivileged writer can
// still use; f_bfree would count the blocks reserved for root), and their
// unit, the fragment size f_frsize (f_bsize where f_frsize is 0).
func diskFigures(st *unix.Statfs_t) (blocks, avail, unit uint64) {
	unit = uint64(st.Frsize)
	if unit == 0 {
		unit = uint64(st.Bsize)
	}
	return st.Blocks, st.Bavail, unit
}
