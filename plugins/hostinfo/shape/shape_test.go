package shape_test

import (
	"encoding/json"
	"testing"

	"lemon/hostcalls/contract"
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

// TestAppendPayloadIsMarshal: AppendPayload writes exactly json.Marshal's
// bytes, HTML escapes, control characters and invalid UTF-8 included, and
// the extremes of every number.
func TestAppendPayloadIsMarshal(t *testing.T) {
	odd := "<a>&b\u2028\u2029\x00\x1f\"\\/é\xff"
	for _, h := range []shape.HostInfo{
		{},
		shape.Payload(contract.SysinfoFigures{Hostname: "h", GOOS: "linux", Machine: "x86_64", Release: "6.8.0-45-generic",
			CLibrary: "gnu", CPUCount: 2, MemTotalBytes: 1 << 30, DiskBlocks: 1000, DiskBlockBytes: 4096, User: "u"}),
		{Hostname: odd, OS: odd, OSVersion: odd, Arch: odd, CPUCount: -1 << 63, MemTotalBytes: 1<<64 - 1,
			MemFreeBytes: 1, DiskTotalBytes: 1<<64 - 1, DiskFreeBytes: 0, UptimeSec: 1<<64 - 1,
			LemonVersion: odd, DefaultCwd: odd, User: odd},
	} {
		want, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if got := shape.AppendPayload([]byte("x"), &h); string(got) != "x"+string(want) {
			t.Errorf("AppendPayload\n got %s\nwant %s", got[1:], want)
		}
	}
}
