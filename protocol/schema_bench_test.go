package protocol

import (
	"encoding/base64"
	"encoding/json"
	"testing"
)

// BenchmarkSchemaValidateFSWrite1MiB: the declared-schema check of a
// node.fs.write carrying 1 MiB (a 1.4 MB base64 string), beside the
// protocol validator the controller also runs.
func BenchmarkSchemaValidateFSWrite1MiB(b *testing.B) {
	no := false
	path := &Schema{Type: "string", MinLength: ip(1), MaxLength: ip(FSMaxPathBytes)}
	s := &Schema{Type: "object", AdditionalProperties: &no, Required: []string{"nodeId", "path", "dataBase64"},
		Properties: map[string]*Schema{"nodeId": {Type: "string", MinLength: ip(1), MaxLength: ip(256)}, "path": path,
			"dataBase64": {Type: "string", MaxLength: ip((FSMaxWriteBytes + 2) / 3 * 4)}}}
	data := base64.StdEncoding.EncodeToString(make([]byte, FSMaxWriteBytes))
	params, _ := json.Marshal(map[string]string{"nodeId": "n", "path": "a/b", "dataBase64": data})
	b.Run("schema", func(b *testing.B) {
		b.SetBytes(int64(len(params)))
		for i := 0; i < b.N; i++ {
			if e := s.Validate(params); e != nil {
				b.Fatal(e)
			}
		}
	})
	b.Run("schema-checked", func(b *testing.B) {
		b.SetBytes(int64(len(params)))
		for i := 0; i < b.N; i++ {
			if e := s.ValidateChecked(params); e != nil {
				b.Fatal(e)
			}
		}
	})
	b.Run("protocol", func(b *testing.B) {
		b.SetBytes(int64(len(params)))
		for i := 0; i < b.N; i++ {
			if e := ValidateFSWrite(params); e != nil {
				b.Fatal(e)
			}
		}
	})
}
