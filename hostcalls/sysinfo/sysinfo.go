// Package sysinfo is the host-call family behind node.host.info: real
// measurements of the node taken from /proc, statfs and uname (docs/ABI.md,
// spec "Host information"). A measurement that fails is an UNAVAILABLE
// error, never a zero.
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

// Snapshot is the result of sysinfo.snapshot (lemon/hostcalls/contract,
// shared with the guest SDK plugins/sdk/sysinfo); field names and units
// match the node.host.info payload (bytes, seconds).
type Snapshot = contract.SysinfoSnapshot

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
			func(ctx context.Context, _ hostcalls.Call, _ contract.Empty) (Snapshot, error) {
				snap, err := s.Snapshot()
				if err != nil {
					return Snapshot{}, err
				}
				return *snap, nil
			},
			hostcalls.Err(unavailable("a measurement"), "a measurement fails; the message names which")),
	}
}

func unavailable(what string) *protocol.Error {
	return protocol.DomainError(protocol.CodeUnavailable, protocol.DomainMeasurementUnavailable,
		what+" could not be measured")
}

// Snapshot takes every measurement. The first one that fails aborts with
// UNAVAILABLE naming which measurement (never OS error text).
func (s *Sysinfo) Snapshot() (*Snapshot, error) {
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
	machine := unix.ByteSliceToString(uts.Machine[:])
	release := unix.ByteSliceToString(uts.Release[:])
	diskTotal, diskFree := diskFigures(&st)
	return &Snapshot{
		Hostname:       host,
		OS:             runtime.GOOS,
		OSVersion:      osVersion(release),
		Arch:           BEAMArch(machine, release, runtime.GOOS, cLibrary()),
		CPUCount:       cpus,
		MemTotalBytes:  total,
		MemFreeBytes:   free,
		DiskTotalBytes: diskTotal,
		DiskFreeBytes:  diskFree,
		UptimeSec:      up,
		LemonVersion:   s.cfg.LemonVersion,
		DefaultCwd:     s.cfg.DefaultCwd,
		User:           u.Username,
	}, nil
}

// osVersion keeps the numeric release ("6.8.0" of "6.8.0-45-generic").
func osVersion(release string) string {
	if i := strings.IndexAny(release, "-+ "); i > 0 {
		return release[:i]
	}
	return release
}

// BEAMArch returns the BEAM system architecture string, the one
// erlang:system_info(system_architecture) reports: the GNU config.guess
// triple of the platform, e.g. x86_64-pc-linux-gnu,
// aarch64-unknown-linux-gnu or aarch64-apple-darwin23.4.0. machine and
// release are uname's, goos is runtime.GOOS and libc is "gnu" or "musl"
// (Linux only). Linux ARM below ARMv8 is taken to be hard-float
// (…-linux-gnueabihf), as every current distribution builds it.
func BEAMArch(machine, release, goos, libc string) string {
	switch machine {
	case "amd64":
		machine = "x86_64"
	case "arm64":
		machine = "aarch64"
	}
	switch goos {
	case "darwin":
		// config.guess appends the Darwin kernel release.
		return machine + "-apple-darwin" + release
	case "linux":
		if libc == "" {
			libc = "gnu"
		}
		switch {
		case machine == "x86_64" || machine == "i386" || machine == "i486" || machine == "i586" || machine == "i686":
			return machine + "-pc-linux-" + libc
		case machine == "s390x" || machine == "s390":
			return machine + "-ibm-linux-" + libc
		case machine == "ppc64le":
			return "powerpc64le-unknown-linux-" + libc
		case machine == "ppc64":
			return "powerpc64-unknown-linux-" + libc
		case strings.HasPrefix(machine, "armv"):
			return machine + "-unknown-linux-" + libc + "eabihf"
		}
		return machine + "-unknown-linux-" + libc
	}
	return machine + "-unknown-" + goos
}

// cLibrary names the system C library as config.guess does: "musl" when
// the only dynamic loader installed is musl's, else "gnu".
func cLibrary() string {
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
