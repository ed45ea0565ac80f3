package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"lemon/client/fakecontrol"
	"lemon/protocol"
)

const callTestToken = "call-test-operator-token"

func callServer(t *testing.T) *fakecontrol.Server {
	srv := fakecontrol.New(fakecontrol.Options{OperatorToken: callTestToken,
		Handle: func(_ *fakecontrol.Conn, req protocol.Request) (any, *protocol.Error) {
			switch req.Method {
			case "node.host.info":
				var p struct {
					NodeID string `json:"nodeId"`
				}
				if perr := protocol.DecodeParams(req.Params, &p); perr != nil {
					return nil, perr
				}
				if perr := protocol.RequireNodeID(p.NodeID); perr != nil {
					return nil, perr
				}
				return map[string]any{"nodeId": p.NodeID, "cpuCount": 2}, nil
			}
			return nil, protocol.Errorf(protocol.CodeMethodNotFound, "unknown method")
		}})
	t.Cleanup(srv.Close)
	return srv
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func runCallT(args []string, e map[string]string, stdin string) (int, string, string) {
	var out, errb bytes.Buffer
	code := runCall(context.Background(), args, env(e), strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCallExitCodes(t *testing.T) {
	srv := callServer(t)
	good := map[string]string{envOperatorToken: callTestToken, envController: srv.URL}

	code, out, _ := runCallT([]string{"node.host.info", `{"nodeId":"n1"}`}, good, "")
	var payload map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &payload) != nil || payload["nodeId"] != "n1" || payload["cpuCount"] != 2.0 {
		t.Fatalf("success: code %d, stdout %q", code, out)
	}

	// An error response: error object JSON on stderr, exit 1, nothing on stdout.
	code, out, errOut := runCallT([]string{"node.host.info", `{}`}, good, "")
	var perr protocol.Error
	if code != 1 || out != "" || json.Unmarshal([]byte(errOut), &perr) != nil || perr.Code != protocol.CodeInvalidParams ||
		perr.Details == nil || perr.Details.Field != "nodeId" {
		t.Fatalf("error response: code %d, stderr %q", code, errOut)
	}

	// Params from stdin, the fallback token variable and --controller.
	code, out, _ = runCallT([]string{"--controller", srv.URL, "node.host.info", "-"},
		map[string]string{envControlPlaneToken: callTestToken}, `{"nodeId":"n2"}`)
	if code != 0 || !strings.Contains(out, `"n2"`) {
		t.Fatalf("stdin params: code %d, stdout %q", code, out)
	}
}

func TestCallAuthAndUsageErrors(t *testing.T) {
	srv := callServer(t)
	const wrong = "definitely-wrong-token"
	code, _, errOut := runCallT([]string{"node.list"}, map[string]string{envOperatorToken: wrong, envController: srv.URL}, "")
	var perr protocol.Error
	if code != 1 || json.Unmarshal([]byte(errOut), &perr) != nil || perr.Code != protocol.CodeUnauthorized {
		t.Fatalf("wrong token: code %d, stderr %q", code, errOut)
	}
	if strings.Contains(errOut, wrong) {
		t.Fatal("token echoed")
	}

	code, _, errOut = runCallT([]string{"node.list"}, map[string]string{envController: srv.URL}, "")
	if code != 2 || !strings.Contains(errOut, envOperatorToken) {
		t.Fatalf("no token: code %d, stderr %q", code, errOut)
	}

	const secretArg = `{"value":"s3cr3t-value"`
	code, _, errOut = runCallT([]string{"node.secrets.set", secretArg}, map[string]string{envOperatorToken: callTestToken, envController: srv.URL}, "")
	if code != 2 || strings.Contains(errOut, "s3cr3t") {
		t.Fatalf("bad params: code %d, stderr %q", code, errOut)
	}
	for _, args := range [][]string{{}, {"a", "{}", "extra"}, {"node.list", "[1]"}} {
		if code, _, _ := runCallT(args, map[string]string{envOperatorToken: callTestToken, envController: srv.URL}, ""); code != 2 {
			t.Fatalf("%q: code %d", args, code)
		}
	}
}

func TestCallUnreachableController(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "ws://" + ln.Addr().String() + "/ws"
	ln.Close()
	code, _, errOut := runCallT([]string{"node.list"}, map[string]string{envOperatorToken: callTestToken, envController: url}, "")
	var perr protocol.Error
	if code != 1 || json.Unmarshal([]byte(errOut), &perr) != nil || perr.Code != protocol.CodeUnavailable ||
		!strings.Contains(perr.Message, "connection refused") {
		t.Fatalf("code %d, stderr %q", code, errOut)
	}
}
