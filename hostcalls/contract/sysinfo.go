package contract

// SysinfoSnapshot is the result of sysinfo.snapshot; field names and
// units match the node.host.info payload (bytes, seconds).
type SysinfoSnapshot struct {
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

// SysinfoSnapshotCall is the sysinfo host call (capability "hostinfo").
var SysinfoSnapshotCall = Call[Empty, SysinfoSnapshot]{"sysinfo.snapshot"}

func sysinfoSpecs() []Spec {
	return []Spec{
		spec(SysinfoSnapshotCall, "Measures the node (from /proc, statfs and uname). A measurement that fails is UNAVAILABLE naming it, never a zero."),
	}
}
