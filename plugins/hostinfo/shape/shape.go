// Package shape turns the node's raw figures (sysinfo.snapshot,
// contract.SysinfoFigures) into the node.host.info payload (spec "Host
// information"). The hostinfo module serves it; it is a package of its own
// so the payload rules are tested natively and the host's benchmark can
// shape the same way (BenchmarkRatioHostInfo). Standard library and lemon
// contract only: it compiles for wasip1.
package shape

import (
	"strconv"
	"strings"

	"lemon/host/abi/wire"
	"lemon/hostcalls/contract"
)

// HostInfo is the node.host.info payload: sizes in bytes, uptime in whole
// seconds.
type HostInfo struct {
	Hostname       string `json:"hostname"`
	OS             string `json:"os"`
	OSVersion      string `json:"osVersion"`
	Arch           string `json:"arch"`
	CPUCount       int    `json:"cpuCount"`
	MemTotalBytes  uint64 `json:"memTotalBytes"`
	MemFreeBytes   uint64 `json:"memFreeBytes"`
	DiskTotalBytes uint64 `json:"diskTotalBytes"`
	DiskFreeBytes  uint64 `json:"diskFreeBytes"`
	UptimeSec      uint64 `json:"uptimeSec"`
	LemonVersion   string `json:"lemonVersion"`
	DefaultCwd     string `json:"defaultCwd"`
	User           string `json:"user"`
}

// Payload shapes f: os is GOOS, osVersion the numeric part of the
// release, arch the BEAM architecture string (BEAMArch), disk sizes the
// block counts times their unit (diskFreeBytes is POSIX df's Available).
func Payload(f contract.SysinfoFigures) HostInfo {
	return HostInfo{
		Hostname:       f.Hostname,
		OS:             f.GOOS,
		OSVersion:      OSVersion(f.Release),
		Arch:           BEAMArch(f.Machine, f.Release, f.GOOS, f.CLibrary),
		CPUCount:       f.CPUCount,
		MemTotalBytes:  f.MemTotalBytes,
		MemFreeBytes:   f.MemFreeBytes,
		DiskTotalBytes: f.DiskBlocks * f.DiskBlockBytes,
		DiskFreeBytes:  f.DiskBlocksAvail * f.DiskBlockBytes,
		UptimeSec:      f.UptimeSec,
		LemonVersion:   f.LemonVersion,
		DefaultCwd:     f.DefaultCwd,
		User:           f.User,
	}
}

// AppendPayload appends h's JSON, the bytes json.Marshal(h) gives, written
// field by field: the module's hot path, without the codec's per-field
// dispatch (about 3 µs less per call in a guest; docs/BENCHMARKS.md,
// "Module ABI (issue 11): the bounds").
func AppendPayload(b []byte, h *HostInfo) []byte {
	b = append(b, `{"hostname":`...)
	b = wire.AppendString(b, h.Hostname)
	b = append(b, `,"os":`...)
	b = wire.AppendString(b, h.OS)
	b = append(b, `,"osVersion":`...)
	b = wire.AppendString(b, h.OSVersion)
	b = append(b, `,"arch":`...)
	b = wire.AppendString(b, h.Arch)
	b = append(b, `,"cpuCount":`...)
	b = strconv.AppendInt(b, int64(h.CPUCount), 10)
	b = append(b, `,"memTotalBytes":`...)
	b = strconv.AppendUint(b, h.MemTotalBytes, 10)
	b = append(b, `,"memFreeBytes":`...)
	b = strconv.AppendUint(b, h.MemFreeBytes, 10)
	b = append(b, `,"diskTotalBytes":`...)
	b = strconv.AppendUint(b, h.DiskTotalBytes, 10)
	b = append(b, `,"diskFreeBytes":`...)
	b = strconv.AppendUint(b, h.DiskFreeBytes, 10)
	b = append(b, `,"uptimeSec":`...)
	b = strconv.AppendUint(b, h.UptimeSec, 10)
	b = append(b, `,"lemonVersion":`...)
	b = wire.AppendString(b, h.LemonVersion)
	b = append(b, `,"defaultCwd":`...)
	b = wire.AppendString(b, h.DefaultCwd)
	b = append(b, `,"user":`...)
	b = wire.AppendString(b, h.User)
	return append(b, '}')
}

// OSVersion keeps the numeric release ("6.8.0" of "6.8.0-45-generic").
func OSVersion(release string) string {
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
