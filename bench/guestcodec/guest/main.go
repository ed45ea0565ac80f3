//go:build wasip1

// Command guest times, inside a Go wasip1 guest, the decode of host-call
// results the SDK makes: JSON (wire.Unmarshal, ABI v2) against the binary
// layout (wire.UnmarshalBinary, ABI v3; docs/ABI.md, "Host-call results").
// Run it through bench/guestcodec, which instruments it with the host's
// deadline checks first (docs/BENCHMARKS.md).
package main

import (
	"fmt"
	"os"
	"time"

	"lemon/host/abi/wire"
	"lemon/hostcalls/contract"
)

func bench(name string, size, n int, f func()) {
	for i := 0; i < n/10; i++ {
		f()
	}
	best := time.Duration(1 << 62)
	for r := 0; r < 5; r++ {
		t0 := time.Now()
		for i := 0; i < n; i++ {
			f()
		}
		if d := time.Since(t0); d < best {
			best = d
		}
	}
	fmt.Printf("%-34s %5d B %8.2f µs\n", name, size, float64(best.Nanoseconds())/float64(n)/1e3)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// pair times both decoders of one result: js and bin are its JSON and
// binary encodings, jsonDec and binDec decode them into a fresh value as
// sdk.Invoke does (a local that stays on the stack).
func pair(name string, js, bin []byte, n int, jsonDec, binDec func()) {
	bench(name+" JSON", len(js), n, jsonDec)
	bench(name+" binary", len(bin), n, binDec)
}

func encode(v any) ([]byte, []byte) {
	js, err := wire.Marshal(v)
	must(err)
	bin, err := wire.AppendBinary(nil, v)
	must(err)
	return js, bin
}

func main() {
	n := 20000
	open := contract.FSOpenResult{Handle: 3, Path: "/home/user/work/big/file-000000.txt",
		Stat: contract.FSRawStat{Mode: 0o100644, Size: 1048576, MtimeSec: 1764633600, MtimeNsec: 123456789, Ino: 12345678,
			Dev: 66306, Nlink: 1, UID: 1000, GID: 1000, Readable: true, Writable: true}}
	js, bin := encode(open)
	pair("FSOpenResult", js, bin, n,
		func() { var out contract.FSOpenResult; must(wire.Unmarshal(js, &out)) },
		func() { var out contract.FSOpenResult; must(wire.UnmarshalBinary(bin, &out)) })

	fig := contract.SysinfoFigures{Hostname: "host-123.example", GOOS: "linux", Machine: "x86_64", Release: "6.8.0-45-generic",
		CLibrary: "gnu", CPUCount: 2, MemTotalBytes: 25262022656, MemFreeBytes: 1234567890, DiskBlocks: 66053021,
		DiskBlocksAvail: 14008404, DiskBlockBytes: 4096, UptimeSec: 18234, LemonVersion: "bench-build",
		DefaultCwd: "/home/user/work", User: "root"}
	fjs, fbin := encode(fig)
	pair("SysinfoFigures", fjs, fbin, n,
		func() { var out contract.SysinfoFigures; must(wire.Unmarshal(fjs, &out)) },
		func() { var out contract.SysinfoFigures; must(wire.UnmarshalBinary(fbin, &out)) })

	pjs, pbin := encode(contract.FSPReadResult{Blob: 7, Length: 65536, Size: 1048576})
	pair("FSPReadResult", pjs, pbin, n,
		func() { var out contract.FSPReadResult; must(wire.Unmarshal(pjs, &out)) },
		func() { var out contract.FSPReadResult; must(wire.UnmarshalBinary(pbin, &out)) })

	gjs, gbin := encode(contract.StoreGetResult{Found: true, Value: []byte(`{"state":"applied","n":12}`), Revision: 9})
	pair("StoreGetResult", gjs, gbin, n,
		func() { var out contract.StoreGetResult; must(wire.Unmarshal(gjs, &out)) },
		func() { var out contract.StoreGetResult; must(wire.UnmarshalBinary(gbin, &out)) })

	names := make([]string, 100)
	for i := range names {
		names[i] = fmt.Sprintf("service/token-%03d", i)
	}
	ljs, lbin := encode(contract.VaultListResult{Names: names})
	pair("VaultListResult (100 names)", ljs, lbin, n/10,
		func() { var out contract.VaultListResult; must(wire.Unmarshal(ljs, &out)) },
		func() { var out contract.VaultListResult; must(wire.UnmarshalBinary(lbin, &out)) })
}
