package shape_test

import (
	"encoding/json"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"lemon/hostcalls/contract"
	"lemon/hostcalls/sysinfo"
	"lemon/plugins/hostinfo/shape"
)

// TestBEAMArch: the arch field is the BEAM system architecture string
// (config.guess's triple), e.g. x86_64-pc-linux-gnu, not a Rust-style
// x86_64-unknown-linux-gnu. (Moved from hostcalls/sysinfo with the
// shaping.)
func TestBEAMArch(t *testing.T) {
	for _, c := range []struct{ machine, release, goos, libc, want string }{
		{"x86_64", "6.8.0-45-generic", "linux", "gnu", "x86_64-pc-linux-gnu"},
		{"x86_64", "6.6.1", "linux", "musl", "x86_64-pc-linux-musl"},
		{"i686", "5.10.0", "linux", "gnu", "i686-pc-linux-gnu"},
		{"aarch64", "6.8.0", "linux", "gnu", "aarch64-unknown-linux-gnu"},
		{"aarch64", "6.8.0", "linux", "musl", "aarch64-unknown-linux-musl"},
		{"armv7l", "6.1.21-v7+", "linux", "gnu", "armv7l-unknown-linux-gnueabihf"},
		{"riscv64", "6.5.0", "linux", "gnu", "riscv64-unknown-linux-gnu"},
		{"ppc64le", "5.14.0", "linux", "gnu", "powerpc64le-unknown-linux-gnu"},
		{"s390x", "5.14.0", "linux", "gnu", "s390x-ibm-linux-gnu"},
		{"arm64", "23.4.0", "darwin", "", "aarch64-apple-darwin23.4.0"},
		{"x86_64", "21.6.0", "darwin", "", "x86_64-apple-darwin21.6.0"},
	} {
		if got := shape.BEAMArch(c.machine, c.release, c.goos, c.libc); got != c.want {
			t.Errorf("BEAMArch(%q, %q, %q, %q) = %q, want %q", c.machine, c.release, c.goos, c.libc, got, c.want)
		}
	}
}

// TestPayloadShape: the payload has exactly the spec's fields, sizes in
// bytes from the raw block counts, and the numeric OS version.
func TestPayloadShape(t *testing.T) {
	f := contract.SysinfoFigures{Hostname: "h", GOOS: "linux", Machine: "x86_64", Release: "6.8.0-45-generic",
		CLibrary: "gnu", CPUCount: 2, MemTotalBytes: 1 << 30, MemFreeBytes: 1 << 20, DiskBlocks: 1000,
		DiskBlocksAvail: 250, DiskBlockBytes: 4096, UptimeSec: 12345, LemonVersion: "v", DefaultCwd: "/home", User: "u"}
	b, _ := json.Marshal(shape.Payload(f))
	want := `{"hostname":"h","os":"linux","osVersion":"6.8.0","arch":"x86_64-pc-linux-gnu","cpuCount":2,` +
		`"memTotalBytes":1073741824,"memFreeBytes":1048576,"diskTotalBytes":4096000,"diskFreeBytes":1024000,` +
		`"uptimeSec":12345,"lemonVersion":"v","defaultCwd":"/home","user":"u"}`
	if string(b) != want {
		t.Fatalf("payload\n got %s\nwant %s", b, want)
	}
}

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
