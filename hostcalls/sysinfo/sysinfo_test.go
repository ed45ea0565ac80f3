package sysinfo

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"lemon/protocol"
)

func fakeProc(t *testing.T, meminfo, uptime string) string {
	dir := t.TempDir()
	if meminfo != "" {
		os.WriteFile(filepath.Join(dir, "meminfo"), []byte(meminfo), 0o644)
	}
	if uptime != "" {
		os.WriteFile(filepath.Join(dir, "uptime"), []byte(uptime), 0o644)
	}
	return dir
}

func TestSnapshotMatchesTheMachine(t *testing.T) {
	cwd := t.TempDir()
	snap, err := New(Config{DefaultCwd: cwd, LemonVersion: "2026.11.0"}).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap.CPUCount != runtime.NumCPU() {
		t.Errorf("cpuCount = %d, want %d", snap.CPUCount, runtime.NumCPU())
	}
	data, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			if snap.MemTotalBytes != kb*1024 {
				t.Errorf("memTotalBytes = %d, want %d", snap.MemTotalBytes, kb*1024)
			}
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(cwd, &st); err != nil {
		t.Fatal(err)
	}
	if snap.DiskTotalBytes != st.Blocks*uint64(st.Bsize) {
		t.Errorf("diskTotalBytes = %d, want %d", snap.DiskTotalBytes, st.Blocks*uint64(st.Bsize))
	}
	up, _ := os.ReadFile("/proc/uptime")
	upSec, _ := strconv.ParseFloat(strings.Fields(string(up))[0], 64)
	if d := int64(upSec) - int64(snap.UptimeSec); d < -2 || d > 2 {
		t.Errorf("uptimeSec = %d, /proc/uptime %f", snap.UptimeSec, upSec)
	}
	if snap.OS != "linux" || !strings.Contains(snap.Arch, "-linux-") || snap.DefaultCwd != cwd || snap.User == "" {
		t.Errorf("snapshot = %+v", snap)
	}
}

func TestMemFreeIsMemFreeNotAvailable(t *testing.T) {
	proc := fakeProc(t, "MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 700 kB\n", "12345.67 1.0\n")
	snap, err := New(Config{DefaultCwd: t.TempDir(), ProcDir: proc}).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap.MemTotalBytes != 1000*1024 || snap.MemFreeBytes != 100*1024 || snap.UptimeSec != 12345 {
		t.Fatalf("snapshot = %+v", snap)
	}
}

func TestFailedMeasurementIsUnavailable(t *testing.T) {
	cases := map[string]Config{
		"no meminfo":      {DefaultCwd: t.TempDir(), ProcDir: fakeProc(t, "", "1.0 1.0")},
		"no MemFree":      {DefaultCwd: t.TempDir(), ProcDir: fakeProc(t, "MemTotal: 10 kB\n", "1.0 1.0")},
		"no uptime":       {DefaultCwd: t.TempDir(), ProcDir: fakeProc(t, "MemTotal: 10 kB\nMemFree: 1 kB\n", "")},
		"garbage uptime":  {DefaultCwd: t.TempDir(), ProcDir: fakeProc(t, "MemTotal: 10 kB\nMemFree: 1 kB\n", "x")},
		"missing cwd":     {DefaultCwd: "/nonexistent/lemon-test", ProcDir: fakeProc(t, "MemTotal: 10 kB\nMemFree: 1 kB\n", "5 5")},
		"zero mem total":  {DefaultCwd: t.TempDir(), ProcDir: fakeProc(t, "MemTotal: 0 kB\nMemFree: 0 kB\n", "5 5")},
		"empty cwd value": {ProcDir: fakeProc(t, "MemTotal: 10 kB\nMemFree: 1 kB\n", "5 5")},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			s := New(cfg)
			_, err := s.Table()[0].Func(context.Background(), nil, nil)
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.CodeUnavailable || pe.DomainCode() != protocol.DomainMeasurementUnavailable {
				t.Fatalf("err = %v", err)
			}
			if strings.Contains(pe.Message, "/") {
				t.Fatalf("message leaks a path: %q", pe.Message)
			}
		})
	}
}

func TestTableResultIsThePayloadShape(t *testing.T) {
	out, err := New(Config{DefaultCwd: t.TempDir(), LemonVersion: "v"}).Table()[0].Func(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(out, &m)
	want := []string{"hostname", "os", "osVersion", "arch", "cpuCount", "memTotalBytes", "memFreeBytes",
		"diskTotalBytes", "diskFreeBytes", "uptimeSec", "lemonVersion", "defaultCwd", "user"}
	if len(m) != len(want) {
		t.Fatalf("fields = %v", m)
	}
	for _, k := range want {
		if _, ok := m[k]; !ok {
			t.Fatalf("missing %s", k)
		}
	}
}

// TestBEAMArch: the arch field is the BEAM system architecture string
// (config.guess's triple), e.g. x86_64-pc-linux-gnu, not a Rust-style
// x86_64-unknown-linux-gnu.
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
		if got := BEAMArch(c.machine, c.release, c.goos, c.libc); got != c.want {
			t.Errorf("BEAMArch(%q, %q, %q, %q) = %q, want %q", c.machine, c.release, c.goos, c.libc, got, c.want)
		}
	}
}

// TestArchOnThisMachine is issue 9's input: on an x86_64 glibc Linux
// machine arch must be x86_64-pc-linux-gnu.
func TestArchOnThisMachine(t *testing.T) {
	snap, err := New(Config{DefaultCwd: t.TempDir(), LemonVersion: "v"}).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" || cLibrary() != "gnu" {
		t.Skipf("not an x86_64 glibc Linux machine (arch %q)", snap.Arch)
	}
	if snap.Arch != "x86_64-pc-linux-gnu" {
		t.Errorf("arch = %q, want x86_64-pc-linux-gnu", snap.Arch)
	}
}
