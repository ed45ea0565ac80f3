package contract

// SysinfoFigures is the result of sysinfo.snapshot: the node's raw
// measurements, not a method payload. The hostinfo module shapes the
// node.host.info payload from them (plugins/hostinfo/shape: the BEAM
// architecture string, the numeric OS version, disk bytes).
type SysinfoFigures struct {
	Hostname        string `json:"hostname" doc:"the host name (os.Hostname)"`
	GOOS            string `json:"goos" doc:"the node binary's runtime.GOOS: linux or darwin"`
	Machine         string `json:"machine" doc:"uname machine, e.g. x86_64, aarch64, arm64"`
	Release         string `json:"release" doc:"uname release, whole, e.g. 6.8.0-45-generic"`
	CLibrary        string `json:"cLibrary" doc:"the system C library as config.guess names it: gnu or musl (Linux)"`
	CPUCount        int    `json:"cpuCount" doc:"logical CPUs usable by the node"`
	MemTotalBytes   uint64 `json:"memTotalBytes" doc:"MemTotal of /proc/meminfo, bytes"`
	MemFreeBytes    uint64 `json:"memFreeBytes" doc:"MemFree (not MemAvailable) of /proc/meminfo, bytes"`
	DiskBlocks      uint64 `json:"diskBlocks" doc:"statfs f_blocks of the default cwd's filesystem"`
	DiskBlocksAvail uint64 `json:"diskBlocksAvail" doc:"statfs f_bavail (blocks an unprivileged writer can use)"`
	DiskBlockBytes  uint64 `json:"diskBlockBytes" doc:"the unit of both block counts: f_frsize, f_bsize where that is 0 (f_bsize on Darwin)"`
	UptimeSec       uint64 `json:"uptimeSec" doc:"whole seconds since boot"`
	LemonVersion    string `json:"lemonVersion" doc:"the node binary's version"`
	DefaultCwd      string `json:"defaultCwd" doc:"the node's default working directory, absolute"`
	User            string `json:"user" doc:"the user name the node runs as"`
}

// SysinfoSnapshotCall is the sysinfo host call (capability "hostinfo").
var SysinfoSnapshotCall = Call[Empty, SysinfoFigures]{"sysinfo.snapshot"}

func sysinfoSpecs() []Spec {
	return []Spec{
		spec(SysinfoSnapshotCall, "Measures the node (from /proc, statfs and uname) and returns the raw figures; the module shapes them. A measurement that fails is UNAVAILABLE naming it, never a zero."),
	}
}
