package host_test

import (
	"testing"

	"lemon/host"
	"lemon/protocol"
)

// Regression: the host decoded input blobs more loosely than the shared
// validators the controller runs, so the node accepted requests the
// controller refuses: null became an empty blob (an empty node.fs.write or
// secret), CR/LF inside base64 were skipped, a case-variant key slipped
// the blob past the host into module memory, and duplicate keys were
// collapsed before the module could see them.
func TestInputBlobStrictness(t *testing.T) {
	f := newFixture(t, host.Config{})
	refused := []struct{ name, args, field string }{
		{"null is not a string", `{"dataBase64":null}`, "dataBase64"},
		{"LF inside base64", `{"dataBase64":"YQ\n=="}`, "dataBase64"},
		{"CR LF after base64", `{"dataBase64":"YQ==\r\n"}`, "dataBase64"},
		{"case variant of the blob field", `{"DataBase64":"Q0FOQVJZ"}`, "dataBase64"},
		{"case variant beside the blob field", `{"dataBase64":"YQ==","DATABASE64":"Q0FOQVJZ"}`, "dataBase64"},
		{"duplicate blob field", `{"dataBase64":"YQ==","dataBase64":"Yg=="}`, "dataBase64"},
		{"duplicate other field", `{"dataBase64":"YQ==","k":"a","k":"b"}`, "k"},
	}
	for _, c := range refused {
		out, perr := f.invoke(t, "test.echo", c.args)
		if perr == nil {
			t.Errorf("%s: accepted: %v", c.name, out)
			continue
		}
		if perr.Code != protocol.CodeInvalidParams || perr.Details == nil || perr.Details.Field != c.field {
			t.Errorf("%s: %+v, want INVALID_PARAMS field %s", c.name, perr, c.field)
		}
	}
	// At the edges that stay valid: an escaped key spelling is the same
	// key, and the exact field still decodes.
	out, perr := f.invoke(t, "test.echo", `{"d\u0061taBase64":"YQ==","k":"v"}`)
	if perr != nil || out["dataBase64"] != "YQ==" || out["size"] != float64(1) {
		t.Fatalf("escaped key: %v %v", out, perr)
	}
}
