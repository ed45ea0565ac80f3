package policies

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
)

// Limits of the [modules.<family>] tables (docs/POLICY.md, "Module
// settings").
const (
	MaxModuleSettingsFamilies = 64    // tables under [modules]
	MaxModuleSettingKeys      = 64    // keys in one family's table
	MaxModuleSettingString    = 4096  // bytes of one string value
	MaxModuleSettingArray     = 256   // elements of one array
	MaxModuleSettingsBytes    = 16384 // bytes of one family's table as JSON
)

// ModuleSettings maps a module family to its settings table: each value
// a string, an integer, a float, a boolean, or an array of those (no
// nested arrays or tables, no datetimes). The host's config.get hands a
// module its own family's table as JSON and nothing of any other.
// Settings are configuration, not secrets: `lemon policy check` prints
// them and the module reads them.
type ModuleSettings map[string]map[string]any

var (
	settingFamilyRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	settingKeyRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)
)

// UnmarshalTOML takes the [modules] table: every entry must itself be a
// table (the decoder would otherwise turn "x = 1" into an empty table).
func (m *ModuleSettings) UnmarshalTOML(v any) error {
	top, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("modules must be a table of [modules.<family>] tables")
	}
	out := ModuleSettings{}
	for family, t := range top {
		table, ok := t.(map[string]any)
		if !ok {
			return fmt.Errorf("modules.%s must be a table", familyLabel(family))
		}
		out[family] = table
	}
	*m = out
	return nil
}

// familyLabel returns a family name as is when it is a valid name,
// else quoted.
func familyLabel(s string) string {
	if settingFamilyRE.MatchString(s) {
		return s
	}
	return fmt.Sprintf("%q", s)
}

// Validate checks names, value types and sizes, naming the offending
// table and key.
func (m ModuleSettings) Validate() error {
	if len(m) > MaxModuleSettingsFamilies {
		return fmt.Errorf("modules: at most %d module tables", MaxModuleSettingsFamilies)
	}
	for _, family := range sortedFamilies(m) {
		if !settingFamilyRE.MatchString(family) {
			return fmt.Errorf("modules: %q is not a module family name (lowercase letters, digits, _ and -, at most 64)", family)
		}
		table := m[family]
		where := "modules." + family
		if len(table) > MaxModuleSettingKeys {
			return fmt.Errorf("%s: at most %d keys", where, MaxModuleSettingKeys)
		}
		for key, v := range table {
			if !settingKeyRE.MatchString(key) {
				return fmt.Errorf("%s: %q is not a setting name (letters, digits, _ and -, at most 64)", where, key)
			}
			if err := checkSetting(v, true); err != nil {
				return fmt.Errorf("%s.%s: %w", where, key, err)
			}
		}
		b, err := json.Marshal(table)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if len(b) > MaxModuleSettingsBytes {
			return fmt.Errorf("%s: the table is %d bytes as JSON, at most %d", where, len(b), MaxModuleSettingsBytes)
		}
	}
	return nil
}

func checkSetting(v any, arrayOK bool) error {
	switch x := v.(type) {
	case string:
		if len(x) > MaxModuleSettingString {
			return fmt.Errorf("a string is at most %d bytes", MaxModuleSettingString)
		}
	case int64, bool:
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("nan and inf are not allowed")
		}
	case []any:
		if !arrayOK {
			return fmt.Errorf("arrays do not nest")
		}
		if len(x) > MaxModuleSettingArray {
			return fmt.Errorf("an array has at most %d elements", MaxModuleSettingArray)
		}
		for _, e := range x {
			if err := checkSetting(e, false); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("a value must be a string, number, boolean or an array of them")
	}
	return nil
}

// merge combines two policy layers: a family's table comes whole from the
// first layer that gives one (settings are not restrictions, so they are
// not intersected).
func (m ModuleSettings) merge(o ModuleSettings) ModuleSettings {
	if len(m) == 0 && len(o) == 0 {
		return nil
	}
	out := ModuleSettings{}
	for f, t := range o {
		out[f] = t
	}
	for f, t := range m {
		out[f] = t
	}
	return out
}

// write prints the tables in TOML, sorted by family and key.
func (m ModuleSettings) write(b *strings.Builder) {
	for _, family := range sortedFamilies(m) {
		fmt.Fprintf(b, "\n[modules.%s]\n", family)
		table := m[family]
		keys := make([]string, 0, len(table))
		for k := range table {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			// A JSON string, number, boolean or flat array is TOML too.
			v, _ := json.Marshal(table[k])
			fmt.Fprintf(b, "%s = %s\n", k, v)
		}
	}
}

func sortedFamilies(m ModuleSettings) []string {
	out := make([]string, 0, len(m))
	for f := range m {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}
