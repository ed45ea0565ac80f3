// Package policies holds the operators' TOML policies (worker and
// controller), their strict decoding, and the restriction (intersection)
// semantics of docs/POLICY.md.
package policies

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"lemon/internal/regfile"
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

// MaxPolicyFileBytes bounds a policy file (4 MiB); a longer one, or a
// path that is not a regular file (a FIFO, a device such as /dev/zero),
// is refused before it is parsed.
const MaxPolicyFileBytes = 4 << 20

// decodeFile reads and strictly decodes a TOML file.
func decodeFile(path string, v any) error {
	data, err := regfile.Read(path, MaxPolicyFileBytes)
	switch {
	case errors.Is(err, regfile.ErrNotRegular):
		return fmt.Errorf("%s: not a regular file", path)
	case errors.Is(err, regfile.ErrTooLarge):
		return fmt.Errorf("%s: longer than %d bytes", path, MaxPolicyFileBytes)
	case err != nil:
		return err
	}
	if err := decodeStrict(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
