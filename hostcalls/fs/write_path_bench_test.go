package fs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"lemon/protocol"
)

// BenchmarkWritePath compares the write path without (reserve=off, the
// path before issue 9) and with the fallocate reservation (reserve=on)
// side by side, on the temp dir's filesystem and on a tmpfs (/dev/shm,
// when it is one):
//
//   - append1MiB: the `lemon fs put` pattern, 1 MiB chunks each written at
//     the end of the file with truncate and the previous chunk's revision
//     (the file restarts every 64 MiB to bound the space used);
//   - overwrite1MiB: 1 MiB over the whole of a 1 MiB file;
//   - overwrite4KiB: 4 KiB at offset 0 of a 1 MiB file, suffix kept.
//
// go test -run '^$' -bench WritePath ./hostcalls/fs
func BenchmarkWritePath(b *testing.B) {
	dirs := []struct{ name, dir string }{{fsName(os.TempDir()), ""}}
	if fsName("/dev/shm") == "tmpfs" {
		dirs = append(dirs, struct{ name, dir string }{"tmpfs", "/dev/shm"})
	}
	chunk := bytes.Repeat([]byte("0123456789abcdef"), (1<<20)/16)
	small := chunk[:4096]
	for _, d := range dirs {
		for _, c := range []struct {
			name string
			run  func(b *testing.B, f *FS, root string)
		}{
			{"append1MiB", func(b *testing.B, f *FS, root string) {
				b.SetBytes(int64(len(chunk)))
				var off int64
				var rev *int64
				for b.Loop() {
					if off == 64<<20 {
						b.StopTimer()
						os.Remove(filepath.Join(root, "put.bin"))
						off, rev = 0, nil
						b.StartTimer()
					}
					r, err := f.Write(protocol.FSWriteCall{Path: "put.bin", Offset: off, Truncate: true, ExpectedModifiedAtMs: rev}, chunk)
					if err != nil {
						b.Fatal(err)
					}
					off += int64(len(chunk))
					rev = &r.MtimeMs
				}
			}},
			{"overwrite1MiB", func(b *testing.B, f *FS, root string) {
				b.SetBytes(int64(len(chunk)))
				rev := seed(b, f, chunk)
				for b.Loop() {
					r, err := f.Write(protocol.FSWriteCall{Path: "over.bin", Truncate: true, ExpectedModifiedAtMs: &rev}, chunk)
					if err != nil {
						b.Fatal(err)
					}
					rev = r.MtimeMs
				}
			}},
			{"overwrite4KiB", func(b *testing.B, f *FS, root string) {
				b.SetBytes(int64(len(small)))
				rev := seed(b, f, chunk)
				for b.Loop() {
					r, err := f.Write(protocol.FSWriteCall{Path: "over.bin", ExpectedModifiedAtMs: &rev}, small)
					if err != nil {
						b.Fatal(err)
					}
					rev = r.MtimeMs
				}
			}},
		} {
			for _, reserve := range []bool{false, true} {
				name := fmt.Sprintf("fs=%s/%s/reserve=%s", d.name, c.name, map[bool]string{false: "off", true: "on"}[reserve])
				b.Run(name, func(b *testing.B) {
					root, err := os.MkdirTemp(d.dir, "lemon-bench-")
					if err != nil {
						b.Fatal(err)
					}
					defer os.RemoveAll(root)
					root, _ = filepath.EvalSymlinks(root)
					f, err := New(Config{Roots: []string{root}, DefaultCwd: root, Home: root})
					if err != nil {
						b.Fatal(err)
					}
					defer f.Close()
					defer skipReserve.Store(false)
					skipReserve.Store(!reserve)
					c.run(b, f, root)
				})
			}
		}
	}
}

// seed creates over.bin with data and returns its revision.
func seed(b *testing.B, f *FS, data []byte) int64 {
	r, err := f.Write(protocol.FSWriteCall{Path: "over.bin", Truncate: true}, data)
	if err != nil {
		b.Fatal(err)
	}
	return r.MtimeMs
}

// fsName names the filesystem type of dir for benchmark labels.
func fsName(dir string) string {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return "unknown"
	}
	switch st.Type {
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlay"
	}
	return fmt.Sprintf("0x%x", st.Type)
}
