package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"lemon/host"
	"lemon/protocol"
)

// BenchmarkRelay measures JSON crossing the module boundary: test.relay
// decodes params, passes them to a host call, reads the result and
// encodes it as the payload; test.relayblob has the host keep the result
// as a payload blob, so the guest touches the JSON once instead of four
// times.
func BenchmarkRelay(b *testing.B) {
	t := &testing.T{}
	f := newFixture(t, host.Config{})
	for _, method := range []string{"test.relay", "test.relayblob"} {
		for _, size := range []int{1 << 10, 20 << 10, 200 << 10} {
			args := json.RawMessage(fmt.Sprintf(`{"s":%q}`, strings.Repeat("x", size)))
			b.Run(fmt.Sprintf("%s/%dKiB", method, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				for i := 0; i < b.N; i++ {
					if _, perr := f.h.Invoke(context.Background(), protocol.InvokeRequest{Method: method, Args: args}); perr != nil {
						b.Fatal(perr)
					}
				}
			})
		}
	}
}
