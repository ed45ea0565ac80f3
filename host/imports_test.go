package host

import (
	"strings"
	"testing"
)

func TestCheckImportsSplitsUndeclaredAndUnused(t *testing.T) {
	man := Manifest{HostCalls: []string{"fs.stat", "fs.read", "store.get"}}
	undeclared, unused := CheckImports(man, []string{"fs.read", "spawn.start", "fs.stat", "log.write"})
	if strings.Join(undeclared, ",") != "log.write,spawn.start" || strings.Join(unused, ",") != "store.get" {
		t.Fatalf("undeclared %v, unused %v", undeclared, unused)
	}
	undeclared, unused = CheckImports(Manifest{HostCalls: []string{"fs.stat"}}, []string{"fs.stat"})
	if undeclared != nil || unused != nil {
		t.Fatalf("matching: undeclared %v, unused %v", undeclared, unused)
	}
}
