package sysinfo

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestDiskFreeIsAvailable: diskFreeBytes is POSIX df's Available
// (f_bavail), not f_bfree, which counts the blocks reserved for root.
func TestDiskFreeIsAvailable(t *testing.T) {
	st := unix.Statfs_t{Bsize: 4096, Frsize: 4096, Blocks: 1000, Bfree: 300, Bavail: 250}
	if blocks, avail, unit := diskFigures(&st); blocks*unit != 4096000 || avail*unit != 1024000 {
		t.Errorf("diskFigures = %d, %d × %d; want 4096000, 1024000 bytes", blocks, avail, unit)
	}
	st = unix.Statfs_t{Bsize: 4096, Frsize: 1024, Blocks: 1000, Bfree: 300, Bavail: 250}
	if blocks, avail, unit := diskFigures(&st); blocks*unit != 1024000 || avail*unit != 256000 {
		t.Errorf("diskFigures with f_frsize 1024 = %d, %d × %d; want 1024000, 256000 bytes", blocks, avail, unit)
	}
	// The live figure follows f_bavail of the cwd's filesystem: a tmpfs
	// has no root reserve, so check on the temp dir's filesystem, where
	// ext4 reserves 5% by default, that the value is nearer f_bavail.
	dir := t.TempDir()
	snap, err := New(Config{DefaultCwd: dir, LemonVersion: "v"}).Figures()
	if err != nil {
		t.Fatal(err)
	}
	var live unix.Statfs_t
	if err := unix.Statfs(dir, &live); err != nil {
		t.Fatal(err)
	}
	unit := uint64(live.Frsize)
	avail, free := live.Bavail*unit, live.Bfree*unit
	dist := func(a, b uint64) uint64 {
		if a > b {
			return a - b
		}
		return b - a
	}
	diskFree := snap.DiskBlocksAvail * snap.DiskBlockBytes
	if free != avail && dist(diskFree, avail) >= dist(diskFree, free) {
		t.Errorf("diskFreeBytes %d is nearer f_bfree (%d) than f_bavail (%d)", diskFree, free, avail)
	}
}
