// Package sysinfo is the host-call family behind node.host.info: raw
// measurements of the node taken from /proc, statfs and uname
// (contract.SysinfoFigures; docs/HOSTCALLS.md). The hostinfo module
// shapes the spec's payload from them. A measurement that fails is an
// UNAVAILABLE error, never a zero.
package sysinfo

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"lemon/hostcalls"
	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// Figures is the result of sysinfo.snapshot (lemon/hostcalls/contract,
// shared with the guest SDK plugins/sdk/sysinfo).
type Figures = contract.SysinfoFigures

// Config says where measurements come from. ProcDir defaults to /proc;
// tests point it at a fake tree to exercise failures.
type Config struct {
	DefaultCwd   string
	LemonVersion string
	ProcDir      string
}

// Sysinfo measures the host.
type Sysinfo struct{ cfg Config }

// New returns the family. DefaultCwd must be an absolute path.
func New(cfg Config) *Sysinfo {
	if cfg.ProcDir == "" {
		cfg.ProcDir = "/proc"
	}
	return &Sysinfo{cfg: cfg}
}

// Table declares the family's host calls (docs/HOSTCALLS.md).
func (s *Sysinfo) Table() hostcalls.Table {
	return hostcalls.Table{
		hostcalls.Define(contract.SysinfoSnapshotCall, hostcalls.CapHostInfo, hostcalls.AuditMeta,
			func(ctx context.Context, _ hostcalls.Call, _ contract.Empty) (Figures, error) {
				f, err := s.Figures()
				if err != nil {
					return Figures{}, err
				}
				return *f, nil
			},
			hostcalls.Err(unavailable("a measurement"), "a measurement fails; the message names which")),
	}
}

func unavailable(what string) *protocol.Error {
	return protocol.DomainError(protocol.CodeUnavailable, protocol.DomainMeasurementUnavailable,
		what+" could not be measured")
}

// Figures takes every measurement. The first one that fails aborts with
// UNAVAILABLE naming which measurement (never OS error text).
func (s *Sysinfo) Figures() (*Figures, error) {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return nil, unavailable("kernel identity")
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return nil, unavailable("hostname")
	}
	total, free, err := s.meminfo()
	if err != nil {
		return nil, unavailable("memory")
	}
	up, err := s.uptime()
	if err != nil {
		return nil, unavailable("uptime")
	}
	var st unix.Statfs_t
	if s.cfg.DefaultCwd == "" {
		return nil, unavailable("disk")
	}
	if err := unix.Statfs(s.cfg.DefaultCwd, &st); err != nil || st.Blocks == 0 {
		return nil, unavailable("disk")
	}
	cpus := runtime.NumCPU()
	if cpus < 1 {
		return nil, unavailable("cpu count")
	}
	u, err := user.Current()
	if err != nil || u.Username == "" {
		return nil, unavailable("user")
	}
	blocks, avail, unit := diskFigures(&st)
	return &Figures{
		Hostname:        host,
		GOOS:            runtime.GOOS,
		Machine:         unix.ByteSliceToString(uts.Machine[:]),
		Release:         unix.ByteSliceToString(uts.Release[:]),
		CLibrary:        cLibrary(),
		CPUCount:        cpus,
		MemTotalBytes:   total,
		MemFreeBytes:    free,
		DiskBlocks:      blocks,
		DiskBlocksAvail: avail,
		DiskBlockBytes:  unit,
		UptimeSec:       up,
		LemonVersion:    s.cfg.LemonVersion,
		DefaultCwd:      s.cfg.DefaultCwd,
		User:            u.Username,
	}, nil
}

// cLibrary names the system C library as config.guess does: "musl" when
// the only dynamic loader installed is musl's, else "gnu"; "" off Linux.
func cLibrary() string {
	if runtime.GOOS != "linux" {
		return ""
	}
	if m, _ := filepath.Glob("/lib/ld-musl-*.so.1"); len(m) > 0 {
		if g, _ := filepath.Glob("/lib*/ld-linux*.so.*"); len(g) == 0 {
			return "musl"
		}
	}
	return "gnu"
}

// meminfo returns MemTotal and MemFree (genuinely free pages, not
// MemAvailable) in bytes.
func (s *Sysinfo) meminfo() (total, free uint64, err error) {
	data, err := os.ReadFile(s.cfg.ProcDir + "/meminfo")
	if err != nil {
		return 0, 0, err
	}
	var haveTotal, haveFree bool
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, perr := strconv.ParseUint(f[1], 10, 64)
		if perr != nil {
			continue
		}
		if len(f) >= 3 && f[2] == "kB" {
			v *= 1024
		}
		switch f[0] {
		case "MemTotal:":
			total, haveTotal = v, true
		case "MemFree:":
			free, haveFree = v, true
		}
	}
	if !haveTotal || !haveFree || total == 0 {
		return 0, 0, os.ErrNotExist
	}
	return total, free, nil
}

// uptime returns whole seconds since boot from /proc/uptime.
func (s *Sysinfo) uptime() (uint64, error) {
	data, err := os.ReadFile(s.cfg.ProcDir + "/uptime")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(data))
	if len(f) < 1 {
		return 0, os.ErrNotExist
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || v <= 0 {
		return 0, os.ErrNotExist
	}
	return uint64(v), nil
}
