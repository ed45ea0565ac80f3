package protocol

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestFSValidatorsBoundaries(t *testing.T) {
	mib := base64.StdEncoding.EncodeToString(make([]byte, FSMaxWriteBytes))
	mibPlus := base64.StdEncoding.EncodeToString(make([]byte, FSMaxWriteBytes+1))
	p4096 := strings.Repeat("a/", 2048)
	cases := []struct {
		name   string
		method string
		params string
		field  string // "" = valid
	}{
		{"read defaults", "node.fs.read", `{"nodeId":"n","path":"a"}`, ""},
		{"read length 1", "node.fs.read", `{"nodeId":"n","path":"a","length":1}`, ""},
		{"read length 0", "node.fs.read", `{"nodeId":"n","path":"a","length":0}`, "length"},
		{"read length 1048576", "node.fs.read", `{"nodeId":"n","path":"a","length":1048576}`, ""},
		{"read length 1048577", "node.fs.read", `{"nodeId":"n","path":"a","length":1048577}`, "length"},
		{"read offset 2^53-1", "node.fs.read", `{"nodeId":"n","path":"a","offset":9007199254740991}`, ""},
		{"read offset 2^53", "node.fs.read", `{"nodeId":"n","path":"a","offset":9007199254740992}`, "offset"},
		{"read offset -1", "node.fs.read", `{"nodeId":"n","path":"a","offset":-1}`, "offset"},
		{"read offset fraction", "node.fs.read", `{"nodeId":"n","path":"a","offset":1.5}`, "offset"},
		{"path 4096 bytes", "node.fs.stat", fmt.Sprintf(`{"nodeId":"n","path":%q}`, p4096), ""},
		{"path 4097 bytes", "node.fs.stat", fmt.Sprintf(`{"nodeId":"n","path":%q}`, p4096+"b"), "path"},
		{"empty path", "node.fs.stat", `{"nodeId":"n","path":""}`, "path"},
		{"NUL path", "node.fs.list", `{"nodeId":"n","path":"a\u0000"}`, "path"},
		{"missing nodeId", "node.fs.mkdir", `{"path":"a"}`, "nodeId"},
		{"unknown field", "node.fs.stat", `{"nodeId":"n","path":"a","x":1}`, "x"},
		{"write 1 MiB", "node.fs.write", `{"nodeId":"n","path":"a","dataBase64":"` + mib + `"}`, ""},
		{"write 1 MiB + 1", "node.fs.write", `{"nodeId":"n","path":"a","dataBase64":"` + mibPlus + `"}`, "dataBase64"},
		{"write empty data", "node.fs.write", `{"nodeId":"n","path":"a","dataBase64":""}`, ""},
		{"write bad base64", "node.fs.write", `{"nodeId":"n","path":"a","dataBase64":"abc"}`, "dataBase64"},
		{"write no data", "node.fs.write", `{"nodeId":"n","path":"a"}`, "dataBase64"},
		{"write negative revision", "node.fs.write", `{"nodeId":"n","path":"a","dataBase64":"","expectedModifiedAtMs":-1}`, "expectedModifiedAtMs"},
		{"move needs revision", "node.fs.move", `{"nodeId":"n","path":"a","destination":"b"}`, "expectedModifiedAtMs"},
		{"move", "node.fs.move", `{"nodeId":"n","path":"a","destination":"b","expectedModifiedAtMs":0}`, ""},
		{"move bad destination", "node.fs.move", `{"nodeId":"n","path":"a","destination":"","expectedModifiedAtMs":0}`, "destination"},
		{"delete", "node.fs.delete", `{"nodeId":"n","path":"a","confirm":"a","confirmationToken":"t"}`, ""},
		{"delete no confirm", "node.fs.delete", `{"nodeId":"n","path":"a","confirmationToken":"t"}`, "confirm"},
		{"delete no token", "node.fs.delete", `{"nodeId":"n","path":"a","confirm":"a"}`, "confirmationToken"},
		{"preview", "node.fs.delete.preview", `{"nodeId":"n","path":"a","recursive":true}`, ""},
	}
	for _, c := range cases {
		spec, ok := LookupMethod(c.method)
		if !ok {
			t.Fatalf("%s not registered", c.method)
		}
		err := spec.Validate(json.RawMessage(c.params))
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil || err.Code != CodeInvalidParams || err.Details == nil || err.Details.Field != c.field {
			t.Errorf("%s: got %+v, want INVALID_PARAMS on %s", c.name, err, c.field)
		}
		if strings.Contains(err.Message, "aaaa") || len(err.Message) > 200 {
			t.Errorf("%s: message echoes input", c.name)
		}
	}
	for _, m := range []string{"node.fs.list", "node.fs.stat", "node.fs.read", "node.fs.write", "node.fs.mkdir", "node.fs.move", "node.fs.delete.preview", "node.fs.delete"} {
		if s, ok := RequiredScope(m); !ok || s != ScopeAdmin {
			t.Errorf("%s scope %q", m, s)
		}
	}
}

func TestFSErrorClassifications(t *testing.T) {
	for domain, m := range fsErrors {
		e := FSError(domain)
		if e.Code != m.code || e.DomainCode() != domain || e.Message == "" {
			t.Errorf("%s: %+v", domain, e)
		}
	}
	e := FSOutcomeUnknown(true)
	if e.Code != CodeTimeout || *e.Details.RetrySafe || !*e.Details.MutationMayHaveApplied {
		t.Errorf("outcome unknown: %+v", e.Details)
	}
	if b := FSError(DomainFilesystemBusy); !*b.Details.RetrySafe {
		t.Error("busy must be retry-safe")
	}
}
