package policies

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestModuleSettingsDecodeAndShow(t *testing.T) {
	w, err := ParseWorker([]byte(`
[modules.checksum]
algorithm = "sha256"
max_files = 100
ratio = 0.25
follow = false
exts = ["go", "md"]

[modules.kv]
namespace = "team-a"
`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(w.Modules["checksum"])
	if string(b) != `{"algorithm":"sha256","exts":["go","md"],"follow":false,"max_files":100,"ratio":0.25}` {
		t.Fatalf("checksum settings = %s", b)
	}
	s := w.String()
	for _, want := range []string{"[modules.checksum]\nalgorithm = \"sha256\"\nexts = [\"go\",\"md\"]\nfollow = false\nmax_files = 100\nratio = 0.25\n",
		"[modules.kv]\nnamespace = \"team-a\"\n"} {
		if !strings.Contains(s, want) {
			t.Fatalf("effective policy lacks %q:\n%s", want, s)
		}
	}
	// The printed policy parses back to the same settings.
	i := strings.Index(s, "[modules.")
	back, err := ParseWorker([]byte(s[i:]))
	if err != nil {
		t.Fatalf("printed settings do not parse: %v\n%s", err, s[i:])
	}
	b2, _ := json.Marshal(back.Modules)
	b1, _ := json.Marshal(w.Modules)
	if string(b1) != string(b2) {
		t.Fatalf("round trip: %s != %s", b2, b1)
	}
}

func TestModuleSettingsRefused(t *testing.T) {
	cases := []struct{ name, toml, wantErr string }{
		{"datetime", "[modules.x]\nt = 1979-05-27\n", "modules.x.t"},
		{"nested table", "[modules.x.y]\nt = 1\n", "modules.x.y"},
		{"inline table", "[modules.x]\nt = {a = 1}\n", "modules.x.t"},
		{"nested array", "[modules.x]\nt = [[1], [2]]\n", "do not nest"},
		{"inf", "[modules.x]\nt = inf\n", "nan and inf"},
		{"not a table", "[modules]\nx = 1\n", "modules"},
		{"family name", "[modules.Bad]\nt = 1\n", "module family name"},
		{"key name", "[modules.x]\n\"a b\" = 1\n", "setting name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseWorker([]byte(c.toml))
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want mention of %q", err, c.wantErr)
			}
		})
	}
}

// TestModuleSettingsLimits checks every bound at the limit and one past.
func TestModuleSettingsLimits(t *testing.T) {
	check := func(name string, m ModuleSettings, ok bool, wantErr string) {
		t.Helper()
		err := m.Validate()
		if ok && err != nil {
			t.Errorf("%s at the limit: %v", name, err)
		}
		if !ok && (err == nil || !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("%s one past: err = %v, want %q", name, err, wantErr)
		}
	}
	str := func(n int) ModuleSettings { return ModuleSettings{"x": {"s": strings.Repeat("a", n)}} }
	check("string", str(MaxModuleSettingString), true, "")
	check("string", str(MaxModuleSettingString+1), false, "at most 4096 bytes")

	arr := func(n int) ModuleSettings {
		a := make([]any, n)
		for i := range a {
			a[i] = int64(i)
		}
		return ModuleSettings{"x": {"a": a}}
	}
	check("array", arr(MaxModuleSettingArray), true, "")
	check("array", arr(MaxModuleSettingArray+1), false, "at most 256 elements")

	keys := func(n int) ModuleSettings {
		t := map[string]any{}
		for i := range n {
			t[fmt.Sprintf("k%d", i)] = true
		}
		return ModuleSettings{"x": t}
	}
	check("keys", keys(MaxModuleSettingKeys), true, "")
	check("keys", keys(MaxModuleSettingKeys+1), false, "at most 64 keys")

	fams := func(n int) ModuleSettings {
		m := ModuleSettings{}
		for i := range n {
			m[fmt.Sprintf("f%d", i)] = map[string]any{"k": true}
		}
		return m
	}
	check("families", fams(MaxModuleSettingsFamilies), true, "")
	check("families", fams(MaxModuleSettingsFamilies+1), false, "at most 64 module tables")

	// A table of exactly MaxModuleSettingsBytes of JSON, then one more.
	sized := func(extra int) ModuleSettings {
		t := map[string]any{}
		for i := range 4 {
			t[fmt.Sprintf("k%d", i)] = strings.Repeat("a", 4000)
		}
		t["k4"] = ""
		b, _ := json.Marshal(t)
		t["k4"] = strings.Repeat("a", MaxModuleSettingsBytes-len(b)+extra)
		if b, _ := json.Marshal(t); len(b) != MaxModuleSettingsBytes+extra {
			panic("sizing")
		}
		return ModuleSettings{"x": t}
	}
	check("table bytes", sized(0), true, "")
	check("table bytes", sized(1), false, "at most 16384")
}

// TestModuleSettingsRestrict: a family's table comes whole from the first
// layer that gives one.
func TestModuleSettingsRestrict(t *testing.T) {
	a := &Worker{Modules: ModuleSettings{"kv": {"ns": "a"}}}
	b := &Worker{Modules: ModuleSettings{"kv": {"ns": "b", "extra": true}, "checksum": {"algo": "sha256"}}}
	got, _ := json.Marshal(Restrict(a, b).Modules)
	if string(got) != `{"checksum":{"algo":"sha256"},"kv":{"ns":"a"}}` {
		t.Fatalf("restrict = %s", got)
	}
	if Restrict(&Worker{}, &Worker{}).Modules != nil {
		t.Fatal("no settings became an empty map")
	}
}
