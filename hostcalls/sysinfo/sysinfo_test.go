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
	if snap.OS != "linux" || !strings.HasSuffix(snap.Arch, "-unknown-linux-gnu") || snap.DefaultCwd != cwd || snap.User == "" {
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

func TestTargetTriple(t *testing.T) {
	for in, want := range map[[2]string]string{
		{"x86_64", "linux"}:  "x86_64-unknown-linux-gnu",
		{"arm64", "darwin"}:  "aarch64-apple-darwin",
		{"aarch64", "linux"}: "aarch64-unknown-linux-gnu",
	} {
		if got := TargetTriple(in[0], in[1]); got != want {
			t.Errorf("TargetTriple(%v) = %q, want %q", in, got, want)
		}
	}
}
