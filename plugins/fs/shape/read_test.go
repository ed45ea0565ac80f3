package shape

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"lemon/hostcalls/contract"
)

// TestAppendStringMatchesEncodingJSON: for every string, AppendString
// writes what encoding/json writes for the same string once each invalid
// UTF-8 byte is U+FFFD (the bytes node.fs payloads have always had).
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	in := []string{"", "plain.txt", "<a>&b.html", `q"b\s`, "ctl\x00\x01\x1f\b\f\n\r\t\x7f", "ls\u2028ps\u2029",
		"bad\xff\xfe.txt", "cut\xc3", "mixed\xe2\x82.x\xffy", "emoji-\U0001F600", "\xed\xa0\x80", "é\u00e9"}
	for c := 0; c < 256; c++ {
		in = append(in, "x"+string(rune(c))+"y", "x"+string([]byte{byte(c)})+"y")
	}
	// Every special byte at every position of 8- to 20-byte strings (the
	// 8-byte scans and their overlapping tail).
	for n := 8; n <= 20; n++ {
		for i := 0; i < n; i++ {
			for _, c := range []byte{'"', '\\', '<', '&', 0x01, '\n', 0xff, 0xc3, 0xe2} {
				b := []byte(strings.Repeat("abcdefghij", 2)[:n])
				b[i] = c
				in = append(in, string(b))
			}
		}
	}
	for _, s := range in {
		want, _ := json.Marshal(fixUTF8(s))
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	}
}

// TestListerKeepsSmallest: whatever the order and count of names, the
// Lister gives the 500 smallest visible ones in byte order, truncated
// exactly when more than 500 are visible (500 passes, 501 truncates),
// across its compactions.
func TestListerKeepsSmallest(t *testing.T) {
	for _, n := range []int{0, 1, 500, 501, 2004, 2005, 5000} {
		for _, hidden := range []bool{false, true} {
			var names []string
			for i := 0; i < n; i++ {
				names = append(names, fmt.Sprintf("n%05d", i))
			}
			names = append(names, ".h1", ".h2")
			rand.New(rand.NewSource(int64(n))).Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
			l := Lister{ShowHidden: hidden}
			for _, s := range names {
				l.Add([]byte(s))
			}
			got, trunc := l.Names()
			visible := n
			if hidden {
				visible += 2
			}
			want := min(visible, 500)
			if len(got) != want || trunc != (visible > 500) {
				t.Fatalf("n=%d hidden=%v: %d names, truncated %v", n, hidden, len(got), trunc)
			}
			for i := 1; i < len(got); i++ {
				if string(got[i-1]) >= string(got[i]) {
					t.Fatalf("n=%d: not in byte order at %d", n, i)
				}
			}
			if n > 0 && !hidden && string(got[0]) != "n00000" || n > 0 && hidden && !strings.HasPrefix(string(got[0]), ".h1") {
				t.Fatalf("n=%d hidden=%v: first %q", n, hidden, got[0])
			}
		}
	}
}

// TestMIME: the table answers case-insensitively from the last path
// component. (Overrides, set with -ldflags -X, is exercised end to end by
// cmd/lemon/e2e TestFSModuleMIMEChangeShipsAsModule.)
func TestMIME(t *testing.T) {
	for name, want := range map[string]string{"a/b.TXT": "text/plain", "x.tar.gz": "application/gzip", ".bashrc": "application/octet-stream",
		"trail.": "application/octet-stream", "dir.md/noext": "application/octet-stream", "r.PDF": "application/pdf"} {
		if got := MIME(name); got != want {
			t.Errorf("MIME(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestCompareIsByteOrder: Compare agrees with bytes.Compare on names that
// differ anywhere (before, inside and after the 8-byte words, in the
// overlapping tail) and on prefixes.
func TestCompareIsByteOrder(t *testing.T) {
	base := []byte("file-000123.txt-and-more")
	var cases [][]byte
	for n := 0; n <= len(base); n++ {
		cases = append(cases, base[:n])
		for i := 0; i < n; i++ {
			for _, d := range []byte{0, 0x7f, 0xff} {
				c := append([]byte(nil), base[:n]...)
				c[i] = d
				cases = append(cases, c)
			}
		}
	}
	for _, a := range cases {
		for _, b := range cases {
			if got, want := Compare(a, b), bytes.Compare(a, b); got != want {
				t.Fatalf("Compare(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}

// TestListPayloadFromReadDirMatchesListPayload: the one-pass payload from
// an fs.readdir result with stat records equals ListPayload's for the same
// names and records (stats, error codes, invalid UTF-8 names with or
// without a record, names needing escapes), and truncated follows the
// result's flag bit 1.
func TestListPayloadFromReadDirMatchesListPayload(t *testing.T) {
	names := [][]byte{[]byte("a.txt"), []byte("b\xff.md"), []byte(`q"<&>.json`), []byte("gone"), []byte("long-name-" + strings.Repeat("x", 40) + ".PNG"),
		[]byte("ctl\x01"), []byte("bad\xfe"), []byte("dir")}
	sts := []*contract.FSRawStat{
		{Mode: 0o100644, Size: 5, MtimeSec: 1700000000, MtimeNsec: 123456789, Readable: true},
		nil, // invalid UTF-8: never stat'ed by the old path; its record is ignored
		{Mode: 0o100600, Size: 1 << 40, MtimeSec: 1, Writable: true},
		nil, // not_found
		{Mode: 0o120777, Size: 3, MtimeSec: 1700000001, Readable: true, Writable: true},
		{Mode: 0o010644},
		{Mode: 0o100644}, // invalid UTF-8 with a record
		{Mode: 0o040755, Size: 4096, MtimeSec: 1700000002, MtimeNsec: 999999999, Readable: true},
	}
	for _, more := range []bool{false, true} {
		raw := []byte{1}
		if more {
			raw[0] |= 2
		}
		var oldStats []*contract.FSRawStat
		var oldErrs []string
		for i, n := range names {
			raw = contract.AppendFSDirEntry(raw, 8, n)
			switch {
			case sts[i] != nil:
				raw = contract.AppendFSStatRecord(raw, sts[i])
			case string(n) == "gone":
				raw = contract.AppendFSStatError(raw, "not_found")
			default:
				raw = contract.AppendFSStatError(raw, "invalid_path")
			}
			if utf8.Valid(n) {
				oldStats = append(oldStats, sts[i])
				if sts[i] == nil {
					oldErrs = append(oldErrs, "not_found")
				} else {
					oldErrs = append(oldErrs, "")
				}
			}
		}
		got, err := ListPayloadFromReadDir("/r/d\xff", raw)
		if err != nil {
			t.Fatal(err)
		}
		want := ListPayload("/r/d\xff", names, more, oldStats, oldErrs)
		if string(got) != string(want) {
			t.Fatalf("more=%v:\n got %s\nwant %s", more, got, want)
		}
		var v struct{ Truncated bool }
		if err := json.Unmarshal(got, &v); err != nil || v.Truncated != more {
			t.Fatalf("truncated: %v %v", v.Truncated, err)
		}
	}
	// Error records as long as a stat record (a 60-byte code) and with an
	// empty code stay errors.
	long := strings.Repeat("c", 60)
	raw := contract.AppendFSStatError(contract.AppendFSDirEntry([]byte{1}, 8, []byte("a")), long)
	raw = contract.AppendFSStatError(contract.AppendFSDirEntry(raw, 8, []byte("b")), "")
	got, err := ListPayloadFromReadDir("/r", raw)
	if want := `{"path":"/r","entries":[{"name":"a","error":"` + long + `"},{"name":"b","error":"filesystem_error"}],"limit":500,"truncated":false}`; err != nil || string(got) != want {
		t.Fatalf("error records: %s %v", got, err)
	}
	if _, err := ListPayloadFromReadDir("/r", []byte{1, 8, 5, 0, 'a'}); err == nil {
		t.Fatal("a cut entry was accepted")
	}
}

// TestAppendIntMatchesStrconv: the branch-free formatter writes what
// strconv does at every digit-count boundary (9/10, 99999999/1e8,
// 1e16-1/1e16 where it hands over to strconv), for negatives and at random.
func TestAppendIntMatchesStrconv(t *testing.T) {
	vals := []int64{0, 1, 9, 10, 99, 100, 1e7 - 1, 1e7, 1e8 - 1, 1e8, 1e8 + 1, 1e9, 1e15, 1e16 - 1, 1e16, 1e16 + 1,
		-1, -10, -1e8, 1<<63 - 1, -1 << 63, 1764630000123, 33188}
	for p := int64(1); p <= 1e18; p *= 10 {
		vals = append(vals, p-1, p, p+1)
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 100000; i++ {
		vals = append(vals, r.Int63n(1<<uint(r.Intn(62)+1)))
	}
	for _, v := range vals {
		if got, want := string(appendInt([]byte("x"), v)), "x"+strconv.FormatInt(v, 10); got != want {
			t.Fatalf("appendInt(%d) = %s, want %s", v, got, want)
		}
	}
}

// TestMIMEQuotedMatchesMIME: the word-at-a-time lookup answers what MIME
// answers (JSON-quoted) for extensions of every length 0 to 9 around the
// 8-byte view, upper case, non-ASCII, slashes and dots in every place,
// and every table entry.
func TestMIMEQuotedMatchesMIME(t *testing.T) {
	in := []string{"", ".", "a", "a.", ".a", "/.txt", "a/.txt", "dir.md/x", "x.TXT", "x.Txt", "a.tar.gz", "y.jpeg", "y.JPEG",
		"z.wasm", "bad\xff.txt", "é.txt", "x.é", "x.\xffxt", ".bashrc", "d/.md", "a/b.md", "sh", "x.sh", "longername.yaml"}
	for ext := range mimeByExt {
		in = append(in, "f."+ext, "dir/f."+strings.ToUpper(ext), "f."+ext+"x", "."+ext)
	}
	for pre := 0; pre <= 10; pre++ {
		for el := 0; el <= 9; el++ {
			base := strings.Repeat("p", pre) + "." + strings.Repeat("t", el)
			in = append(in, base, "/"+base, strings.Repeat("q", pre)+"/"+strings.Repeat("t", el), base+"/", "a."+base)
		}
	}
	for _, s := range in {
		want := string(AppendString(nil, MIME(s)))
		if got := mimeQuoted(s); got != want {
			t.Errorf("mimeQuoted(%q) = %s, want %s", s, got, want)
		}
		if got := mimeQuoted([]byte(s)); got != want {
			t.Errorf("mimeQuoted([]byte %q) = %s, want %s", s, got, want)
		}
	}
}
