package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"lemon/hostcalls"
	"lemon/hostcalls/contract"
	"lemon/hostcalls/families"
)

// TestHostcallsDocIsCurrent regenerates docs/HOSTCALLS.md in memory and
// fails when the committed file differs.
func TestHostcallsDocIsCurrent(t *testing.T) {
	skipWithoutAllFamilies(t)
	want, err := render(families.DocTables())
	if err != nil {
		t.Fatalf("%v (the default build compiles every family in)", err)
	}
	got, err := os.ReadFile("../../docs/HOSTCALLS.md")
	if err != nil {
		t.Fatalf("docs/HOSTCALLS.md: %v; create it with `%s`", err, Command)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		line := 0
		for line < len(gl) && line < len(wl) && gl[line] == wl[line] {
			line++
		}
		t.Fatalf("docs/HOSTCALLS.md is stale (first difference at line %d); regenerate it: %s", line+1, Command)
	}
}

// TestRenderNamesEveryCall: the document has a section per host call with
// its capability, audit class, every argument field and every declared
// error, so a table or contract change shows in it.
func TestRenderNamesEveryCall(t *testing.T) {
	skipWithoutAllFamilies(t)
	tables := families.DocTables()
	b, err := render(tables)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, table := range tables {
		for _, hc := range table {
			i := strings.Index(doc, "\n### `"+hc.Name+"`\n")
			if i < 0 {
				t.Fatalf("no section for %s", hc.Name)
			}
			sec := doc[i+1:]
			if j := strings.Index(sec[4:], "\n### "); j >= 0 {
				sec = sec[:j+4]
			}
			for _, want := range []string{"capability: `" + hc.Capability + "`", "audit class: `" + string(hc.Audit) + "`"} {
				if !strings.Contains(sec, want) {
					t.Errorf("%s: section lacks %q", hc.Name, want)
				}
			}
			for _, p := range hc.Params {
				if !strings.Contains(sec, "| `"+p+"` |") {
					t.Errorf("%s: section lacks argument %s", hc.Name, p)
				}
			}
			for _, e := range hc.Errors {
				if !strings.Contains(sec, "| `"+e.Code+"` |") || !strings.Contains(sec, e.When) {
					t.Errorf("%s: section lacks error %+v", hc.Name, e)
				}
			}
			if (hc.Audit == hostcalls.AuditMutation) != strings.Contains(sec, "(an effect)") {
				t.Errorf("%s: effect not stated", hc.Name)
			}
		}
	}
}

// TestRenderRefusesAnUncontractedCall: a table entry without a contract
// entry cannot be documented (nor a contract entry no table offers).
func TestRenderRefusesAnUncontractedCall(t *testing.T) {
	skipWithoutAllFamilies(t)
	tables := append(families.DocTables(), hostcalls.Table{{Name: "kv.get", Capability: "kv", Audit: hostcalls.AuditRead}})
	if _, err := render(tables); err == nil || !strings.Contains(err.Error(), "kv.get has no contract entry") {
		t.Fatalf("render with an uncontracted call: %v", err)
	}
	if _, err := render(families.DocTables()[:1]); err == nil || !strings.Contains(err.Error(), "is in no table") {
		t.Fatalf("render without most families: %v", err)
	}
	if len(contract.Specs()) < 26 {
		t.Fatalf("contract has %d calls", len(contract.Specs()))
	}
}

// skipWithoutAllFamilies skips when build tags (lemon_no_fs, ...) left a
// family out: the document describes the default build.
func skipWithoutAllFamilies(t *testing.T) {
	if n := len(families.DocTables()); n != 6 {
		t.Skipf("%d of 6 host-call families compiled in (build tags)", n)
	}
}
