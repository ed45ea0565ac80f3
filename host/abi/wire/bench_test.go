package wire_test

import (
	"encoding/json"
	"testing"

	"lemon/host/abi/wire"
)

type smallParams struct {
	NodeID string `json:"nodeId"`
	Path   string `json:"path"`
	Limit  int    `json:"limit,omitempty"`
	Follow bool   `json:"follow,omitempty"`
}

var smallIn = []byte(`{"nodeId":"n1","path":"src/main.go","limit":100,"follow":true}`)

func BenchmarkDecodeParamsSmall(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var p smallParams
		if err := wire.DecodeParams(smallIn, &p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshalSmall(b *testing.B) {
	b.ReportAllocs()
	p := smallParams{NodeID: "n1", Path: "src/main.go", Limit: 100, Follow: true}
	var buf []byte
	for i := 0; i < b.N; i++ {
		var err error
		if buf, err = wire.Append(buf[:0], p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodingJSONSmall(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var p smallParams
		if err := json.Unmarshal(smallIn, &p); err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(p); err != nil {
			b.Fatal(err)
		}
	}
}
