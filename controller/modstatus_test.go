package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"lemon/host/moduleset"
	"lemon/protocol"
)

// Methods declared only by the test sets' modules, each in its family's
// namespace (the controller refuses first-party namespaces to others).
const (
	dEcho = "node.echo.echo"
	dSlow = "node.broken.slow"
	kEcho = "node.kv.echo"
	kSlow = "node.kv.slow"
)

// goodAndBrokenSet pins two modules: "echo" serving dEcho and "broken"
// serving dSlow. The controller does not compile modules, so any bytes do.
func goodAndBrokenSet(t *testing.T) (*ModuleSet, moduleset.Manifest) {
	t.Helper()
	good, bad := []byte("good module bytes"), []byte("broken module bytes")
	gs, bs := sha256.Sum256(good), sha256.Sum256(bad)
	m := moduleset.Manifest{Modules: []moduleset.Module{
		{Family: "echo", Version: "1.0.0", SHA256: hex.EncodeToString(gs[:]), Size: int64(len(good)), File: "echo.wasm",
			Methods: []moduleset.Method{{Name: dEcho, Version: 1}}},
		{Family: "broken", Version: "0.1.0", SHA256: hex.EncodeToString(bs[:]), Size: int64(len(bad)), File: "broken.wasm",
			Methods: []moduleset.Method{{Name: dSlow, Version: 1}}},
	}}
	ms, err := NewModuleSet(m, map[string][]byte{"echo": good, "broken": bad})
	if err != nil {
		t.Fatal(err)
	}
	return ms, m
}

const brokenReason = "compile_failed: compile failed"

// A node reports one module refused: node.describe shows it, a call to
// one of its methods answers UNAVAILABLE module_refused from the
// controller (nothing reaches the node), the good module serves, and
// node.modules.status shows the pinned set, the node's digest and the
// refusal.
func TestModuleRefusedShownAndAnswered(t *testing.T) {
	cfg := testConfig()
	ms, m := goodAndBrokenSet(t)
	cfg.ModuleSet = ms
	s := startServer(t, cfg)
	statuses := []protocol.ModuleStatus{
		{Family: "echo", Version: "1.0.0", SHA256: m.Modules[0].SHA256, State: protocol.ModuleLoaded},
		{Family: "broken", Version: "0.1.0", SHA256: m.Modules[1].SHA256, State: protocol.ModuleRefused, Reason: brokenReason},
	}
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{Methods: map[string]int{dEcho: 1},
		ModuleSetDigest: m.Digest(), Modules: statuses}, echoHandler)
	nodeID := nodeIDOf("worker-1")
	op := connectOperator(t, s.url, adminToken)

	f := op.call(protocol.MethodNodeDescribe, protocol.NodeDescribeParams{NodeID: nodeID})
	var d protocol.NodeDescription
	if !f.OK || json.Unmarshal(f.Payload, &d) != nil || len(d.Modules) != 2 || d.Modules[1].State != protocol.ModuleRefused ||
		d.Modules[1].Reason != brokenReason || d.Modules[0].State != protocol.ModuleLoaded {
		t.Fatalf("describe: %s", f.raw)
	}

	f = op.call(dSlow, map[string]any{"nodeId": nodeID})
	wantError(t, f, protocol.CodeUnavailable, protocol.DomainModuleRefused)
	wantRetry(t, f, true, false)
	if !strings.Contains(f.Error.Message, "broken") || !strings.Contains(f.Error.Message, "compile_failed") {
		t.Fatalf("message: %s", f.raw)
	}
	select {
	case req := <-n.requests:
		t.Fatalf("a call to a refused module reached the node: %s", req.Method)
	default:
	}
	if f := op.call(dEcho, map[string]any{"nodeId": nodeID, "value": 7}); !f.OK {
		t.Fatalf("good module: %s", f.raw)
	}

	reader := connectOperator(t, s.url, readToken)
	f = reader.call(protocol.MethodModulesStatus, nil)
	var st protocol.ModulesStatusResult
	if !f.OK || json.Unmarshal(f.Payload, &st) != nil {
		t.Fatalf("status: %s", f.raw)
	}
	if st.Pinned == nil || st.Pinned.Digest != m.Digest() || len(st.Pinned.Modules) != 2 ||
		st.Pinned.Modules[1].Family != "broken" || st.Pinned.Modules[1].SHA256 != m.Modules[1].SHA256 ||
		len(st.Pinned.Modules[0].Methods) != 1 || st.Pinned.Modules[0].Methods[0] != dEcho {
		t.Fatalf("pinned: %s", f.raw)
	}
	// Both token nodes are registered; worker-2 never connected.
	if len(st.Nodes) != 2 || st.Nodes[0].NodeID != nodeID || !st.Nodes[0].Current || !st.Nodes[0].Online ||
		len(st.Nodes[0].Refused) != 1 || st.Nodes[0].Refused[0].Reason != brokenReason || st.Truncated ||
		st.Nodes[1].Online || st.Nodes[1].Current || len(st.Nodes[1].Refused) != 0 {
		t.Fatalf("nodes: %s", f.raw)
	}
}

// A method the node does not advertise and no refusal explains stays
// node_method_unavailable; a node on another set digest is not current.
func TestModuleStatusOtherDigest(t *testing.T) {
	cfg := testConfig()
	ms, m := goodAndBrokenSet(t)
	cfg.ModuleSet = ms
	s := startServer(t, cfg)
	connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{Methods: map[string]int{dEcho: 1},
		ModuleSetDigest: strings.Repeat("a", 64)}, echoHandler)
	op := connectOperator(t, s.url, adminToken)
	wantError(t, op.call(dSlow, map[string]any{"nodeId": nodeIDOf("worker-1")}),
		protocol.CodeUnavailable, protocol.DomainNodeMethodUnavailable)
	f := op.call(protocol.MethodModulesStatus, nil)
	var st protocol.ModulesStatusResult
	json.Unmarshal(f.Payload, &st)
	if len(st.Nodes) != 2 || st.Nodes[0].Current || st.Nodes[0].ModuleSetDigest != strings.Repeat("a", 64) ||
		st.Pinned.Digest != m.Digest() {
		t.Fatalf("status: %s", f.raw)
	}
}

// Without a pinned set, pinned is null.
func TestModuleStatusNoSet(t *testing.T) {
	s := startServer(t, testConfig())
	op := connectOperator(t, s.url, readToken)
	f := op.call(protocol.MethodModulesStatus, nil)
	if !f.OK || !strings.Contains(string(f.Payload), `"pinned":null`) || !strings.Contains(string(f.Payload), `"current":false,"refused":[]`) {
		t.Fatalf("status: %s", f.raw)
	}
	wantError(t, op.call(protocol.MethodModulesStatus, map[string]any{"x": 1}), protocol.CodeInvalidParams, "")
}

// connectRefused sends a node connect and returns the error response.
func connectRefused(t *testing.T, url string, adv protocol.NodeAdvertise) frame {
	t.Helper()
	p := dialPeer(t, url)
	p.writeJSON(protocol.Request{Type: protocol.FrameReq, ID: "c1", Method: "connect",
		Params: mustJSON(t, protocol.ConnectParams{Role: protocol.RoleNode, Auth: protocol.ConnectAuth{Token: nodeToken},
			Client: protocol.ConnectClient{ID: "fake-node", Version: "1"}, Node: &adv})})
	return p.next()
}

// The per-module report is bounded at connect: 64 statuses pass and 65
// fail; a reason of 256 bytes passes and 257 fails; a malformed sha256,
// an unknown state, or a reason on a loaded module fail.
func TestModuleStatusBounds(t *testing.T) {
	s := startServer(t, testConfig())
	sha := strings.Repeat("0", 64)
	many := func(n int) []protocol.ModuleStatus {
		out := make([]protocol.ModuleStatus, n)
		for i := range out {
			out[i] = protocol.ModuleStatus{Family: "f", Version: "1", SHA256: sha, State: protocol.ModuleLoaded}
		}
		return out
	}
	adv := func(st []protocol.ModuleStatus) protocol.NodeAdvertise {
		return protocol.NodeAdvertise{Methods: map[string]int{dEcho: 1}, Modules: st}
	}
	refusedWith := func(reason string) []protocol.ModuleStatus {
		return []protocol.ModuleStatus{{Family: "f", Version: "1", SHA256: sha, State: protocol.ModuleRefused, Reason: reason}}
	}
	for name, st := range map[string][]protocol.ModuleStatus{
		"65 statuses":       many(65),
		"257-byte reason":   refusedWith(strings.Repeat("r", 257)),
		"control character": refusedWith("compile_failed\n"),
		"bidi override":     refusedWith("duplicate: \u202eok"),
		"line separator":    {{Family: "fs", Version: "1\u2028x", SHA256: sha, State: protocol.ModuleLoaded}},
		"bad sha256":        {{Family: "f", Version: "1", SHA256: "ABC", State: protocol.ModuleLoaded}},
		"unknown state":     {{Family: "f", Version: "1", SHA256: sha, State: "maybe"}},
		"reason on loaded":  {{Family: "f", Version: "1", SHA256: sha, State: protocol.ModuleLoaded, Reason: "x"}},
	} {
		f := connectRefused(t, s.url, adv(st))
		if f.Type != protocol.FrameRes || f.Error == nil || f.Error.Code != protocol.CodeInvalidParams ||
			f.Error.Details == nil || f.Error.Details.Field != "node.modules" {
			t.Fatalf("%s: %s", name, f.raw)
		}
	}
	connectNode(t, s.url, nodeToken, adv(many(64)), echoHandler)
	connectNode(t, s.url, node2Token, adv(refusedWith(strings.Repeat("r", 256))), echoHandler)
	op := connectOperator(t, s.url, readToken)
	f := op.call(protocol.MethodNodeDescribe, protocol.NodeDescribeParams{NodeID: nodeIDOf("worker-1")})
	var d protocol.NodeDescription
	if json.Unmarshal(f.Payload, &d) != nil || len(d.Modules) != 64 {
		t.Fatalf("64 statuses: %.300s", f.raw)
	}
}

// node.modules.status cuts its node list to the budget and says so.
func TestModuleStatusTruncated(t *testing.T) {
	s := startServer(t, testConfig())
	// The two token nodes of testConfig are registered from the start.
	full := s.reg.modulesStatus(1 << 20)
	if len(full.Nodes) != 2 || full.Truncated {
		t.Fatalf("full: %+v", full)
	}
	one, _ := json.Marshal(full.Nodes[0])
	cut := s.reg.modulesStatus(len(one) + 1)
	if len(cut.Nodes) != 1 || !cut.Truncated || cut.Nodes[0].NodeID != full.Nodes[0].NodeID {
		t.Fatalf("cut: %+v", cut)
	}
	if none := s.reg.modulesStatus(len(one)); len(none.Nodes) != 0 || !none.Truncated {
		t.Fatalf("none: %+v", none)
	}
}

// A node running the pinned set does not advertise a method whose
// declared capability is outside the ceiling it advertised: the
// controller answers FORBIDDEN capability_denied without a round trip.
// With ceiling "all", or on another set, it cannot tell and answers
// node_method_unavailable.
func TestCeilingDeniedMethodAnsweredByController(t *testing.T) {
	mk := func(t *testing.T) (*ModuleSet, moduleset.Manifest) {
		b := []byte("kv module bytes")
		sum := sha256.Sum256(b)
		m := moduleset.Manifest{Modules: []moduleset.Module{{Family: "kv", Version: "1", SHA256: hex.EncodeToString(sum[:]),
			Size: int64(len(b)), File: "kv.wasm", Methods: []moduleset.Method{
				{Name: kEcho, Version: 1, Capability: "read"}, {Name: kSlow, Version: 1, Capability: "kv"}}}}}
		ms, err := NewModuleSet(m, map[string][]byte{"kv": b})
		if err != nil {
			t.Fatal(err)
		}
		return ms, m
	}
	for _, tc := range []struct {
		name         string
		caps         []string
		otherDigest  bool
		code, domain string
	}{
		{"ceiling without kv", []string{"read"}, false, protocol.CodeForbidden, protocol.DomainCapabilityDenied},
		{"ceiling all", []string{"all"}, false, protocol.CodeUnavailable, protocol.DomainNodeMethodUnavailable},
		{"another set", []string{"read"}, true, protocol.CodeUnavailable, protocol.DomainNodeMethodUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			ms, m := mk(t)
			cfg.ModuleSet = ms
			s := startServer(t, cfg)
			digest := m.Digest()
			if tc.otherDigest {
				digest = strings.Repeat("b", 64)
			}
			n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{Methods: map[string]int{kEcho: 1},
				ModuleSetDigest: digest, Capabilities: tc.caps}, echoHandler)
			op := connectOperator(t, s.url, adminToken)
			wantError(t, op.call(kSlow, map[string]any{"nodeId": nodeIDOf("worker-1")}), tc.code, tc.domain)
			select {
			case req := <-n.requests:
				t.Fatalf("reached the node: %s", req.Method)
			default:
			}
			if f := op.call(kEcho, map[string]any{"nodeId": nodeIDOf("worker-1")}); !f.OK {
				t.Fatalf("allowed method: %s", f.raw)
			}
		})
	}
}

// A node's advertised capabilities are capability names ("all" or
// ^[a-z][a-z0-9_]{0,31}$): terminal escapes and newlines are refused, a
// 32-byte name passes and a 33-byte one does not.
func TestAdvertisedCapabilitiesAreNames(t *testing.T) {
	s := startServer(t, testConfig())
	for _, caps := range [][]string{{"\x1b[2J"}, {"a\nb"}, {"KV"}, {strings.Repeat("k", 33)}} {
		f := connectRefused(t, s.url, protocol.NodeAdvertise{Methods: map[string]int{dEcho: 1}, Capabilities: caps})
		if f.Type != protocol.FrameRes || f.Error == nil || f.Error.Code != protocol.CodeInvalidParams ||
			f.Error.Details == nil || f.Error.Details.Field != "node.capabilities" {
			t.Fatalf("%q: %s", caps, f.raw)
		}
	}
	connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{Methods: map[string]int{dEcho: 1},
		Capabilities: []string{"all", "kv", strings.Repeat("k", 32)}}, echoHandler)
}
