// Package policies holds the operators' TOML policies (worker and
// controller), their strict decoding, and the restriction (intersection)
// semantics of docs/POLICY.md.
package policies

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// decodeStrict decodes TOML into v and fails on any key v does not define,
// naming every such key.
func decodeStrict(data []byte, v any) error {
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(v)
	if err != nil {
		return err
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		sort.Strings(keys)
		return fmt.Errorf("unknown key(s): %s", strings.Join(keys, ", "))
	}
	return nil
}

// decodeFile reads and strictly decodes a TOML file.
func decodeFile(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := decodeStrict(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
