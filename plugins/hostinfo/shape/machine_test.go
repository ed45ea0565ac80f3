//go:build linux || darwin

package shape_test

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"lemon/hostcalls/sysinfo"
	"lemon/plugins/hostinfo/shape"
)

// TestPayloadMatchesTheMachine shapes this machine's figures: memory and
// disk agree with /proc and statfs, arch is issue 9's x86_64-pc-linux-gnu
// on an x86_64 glibc Linux machine.
func TestPayloadMatchesTheMachine(t *testing.T) {
	cwd := t.TempDir()
	f, err := sysinfo.New(sysinfo.Config{DefaultCwd: cwd, LemonVersion: "v"}).Figures()
	if err != nil {
		t.Fatal(err)
	}
	p := shape.Payload(*f)
	data, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(data), "\n") {
		if fs := strings.Fields(line); len(fs) >= 2 && fs[0] == "MemTotal:" {
			kb, _ := strconv.ParseUint(fs[1], 10, 64)
			if p.MemTotalBytes != kb*1024 {
				t.Errorf("memTotalBytes = %d, want %d", p.MemTotalBytes, kb*1024)
			}
		}
	}
	if p.DiskTotalBytes == 0 || p.DiskTotalBytes != f.DiskBlocks*f.DiskBlockBytes || p.DiskFreeBytes != f.DiskBlocksAvail*f.DiskBlockBytes {
		t.Errorf("disk = %d/%d, figures %+v", p.DiskTotalBytes, p.DiskFreeBytes, f)
	}
	if p.OS != runtime.GOOS || p.DefaultCwd != cwd || p.User == "" || p.CPUCount != runtime.NumCPU() {
		t.Errorf("payload = %+v", p)
	}
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" && f.CLibrary == "gnu" && p.Arch != "x86_64-pc-linux-gnu" {
		t.Errorf("arch = %q, want x86_64-pc-linux-gnu", p.Arch)
	}
}
