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

func TestFiguresMatchTheMachine(t *testing.T) {
	cwd := t.TempDir()
	snap, err := New(Config{DefaultCwd: cwd, LemonVersion: "2026.11.0"}).Figures()
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
	if blocks, avail, unit := diskFigures(&st); snap.DiskBlocks != blocks || snap.DiskBlocksAvail != avail || snap.DiskBlockBytes != unit || unit == 0 {
		t.Errorf("disk = %d/%d × %d, statfs %d/%d × %d", snap.DiskBlocks, snap.DiskBlocksAvail, snap.DiskBlockBytes, blocks, avail, unit)
	}
	up, _ := os.ReadFile("/proc/uptime")
	upSec, _ := strconv.ParseFloat(strings.Fields(string(up))[0], 64)
	if d := int64(upSec) - int64(snap.UptimeSec); d < -2 || d > 2 {
		t.Errorf("uptimeSec = %d, /proc/uptime %f", snap.UptimeSec, upSec)
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		t.Fatal(err)
	}
	if snap.GOOS != "linux" || snap.Machine != unix.ByteSliceToString(uts.Machine[:]) || snap.Release != unix.ByteSliceToString(uts.Release[:]) ||
		(snap.CLibrary != "gnu" && snap.CLibrary != "musl") || snap.DefaultCwd != cwd || snap.User == "" || snap.LemonVersion != "2026.11.0" {
		t.Errorf("figures = %+v", snap)
	}
}

func TestMemFreeIsMemFreeNotAvailable(t *testing.T) {
	proc := fakeProc(t, "MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 700 kB\n", "12345.67 1.0\n")
	snap, err := New(Config{DefaultCwd: t.TempDir(), ProcDir: proc}).Figures()
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

// TestTableResultIsRawFigures: sysinfo.snapshot answers the raw figures
// (contract.SysinfoFigures), not the node.host.info payload; the hostinfo
// module shapes that (plugins/hostinfo/shape, whose tests now hold the
// BEAM arch and payload-shape checks that were here).
func TestTableResultIsRawFigures(t *testing.T) {
	out, err := New(Config{DefaultCwd: t.TempDir(), LemonVersion: "v"}).Table()[0].JSONFunc()(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(out, &m)
	want := []string{"hostname", "goos", "machine", "release", "cLibrary", "cpuCount", "memTotalBytes", "memFreeBytes",
		"diskBlocks", "diskBlocksAvail", "diskBlockBytes", "uptimeSec", "lemonVersion", "defaultCwd", "user"}
	if len(m) != len(want) {
		t.Fatalf("fields = %v", m)
	}
	for _, k := range want {
		if _, ok := m[k]; !ok {
			t.Fatalf("missing %s", k)
		}
	}
}
