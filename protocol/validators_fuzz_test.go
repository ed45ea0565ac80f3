package protocol

import (
	"encoding/json"
	"testing"
)

// Every validator runs on untrusted params in the controller (before
// dispatch) and again on the node, in goroutines without a recover: a
// panic on any input would take down the process. Run with
// go test -fuzz=FuzzMethodValidators ./protocol.
func FuzzMethodValidators(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `[]`, `"x"`, `{"nodeId":"n"}`,
		`{"nodeId":"n","path":"a/b","offset":0,"length":10}`,
		`{"nodeId":"n","path":"a","dataBase64":"QQ==","mode":"create"}`,
		`{"nodeId":"n","processId":"p","cwd":".","argv":["echo","hi"],"stdinBase64":"","timeoutMs":1000,"maxOutputBytes":1}`,
		`{"nodeId":"n","name":"a","value":"v"}`,
		`{"nodeId":"n","from":"a","to":"b"}`,
		`{"nodeId":"n","path":"a","recursive":true,"confirmationToken":"t"}`,
		`{"nodeId":"n","argv":[null],"timeoutMs":-1e400}`,
		`{"nodeId":"n","offset":9007199254740993,"length":-0}`,
	} {
		f.Add([]byte(s))
	}
	names := MethodNames()
	f.Fuzz(func(t *testing.T, data []byte) {
		raw := json.RawMessage(data)
		for _, name := range names {
			spec, _ := LookupMethod(name)
			if spec.Validate == nil {
				continue
			}
			if spec.Validate(raw) != nil {
				continue
			}
			_ = spec.BrokerDeadline(raw)
			if spec.RecheckSession != nil {
				_ = spec.RecheckSession(raw)
			}
		}
		var p ConnectParams
		DecodeParams(raw, &p)
		var r InvokeResult
		DecodeParams(raw, &r)
		CheckJSONLimits(data)
	})
}
