package worker_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lemon/client"
	"lemon/client/fakecontrol"
	"lemon/controller"
	"lemon/host"
	"lemon/host/hosttest"
	"lemon/host/moduleset"
	"lemon/policies"
	"lemon/protocol"
	"lemon/worker"
)

const refusedOpToken = "refused-test-operator-token"

// goodAndBrokenSet pins the real hostinfo module and a "broken" module
// whose bytes match their pin but are not wasm (it fails to compile).
func goodAndBrokenSet(t *testing.T) (moduleset.Manifest, map[string][]byte) {
	t.Helper()
	good := hosttest.Build(t, "plugins/hostinfo")
	man, err := host.Inspect(context.Background(), good)
	if err != nil {
		t.Fatal(err)
	}
	gp := hosttest.Pin("hostinfo", good)
	gp.Methods = man.Methods
	bad := []byte("\x00asm\x01\x00\x00\x00 corrupted module")
	bp := hosttest.Pin("broken", bad)
	bp.Methods = []moduleset.Method{{Name: "node.broken.run", Version: 1, Capability: "hostinfo"}}
	return moduleset.Manifest{Modules: []moduleset.Module{gp, bp}}, map[string][]byte{"hostinfo": good, "broken": bad}
}

func nodeHost(t *testing.T, pol *policies.Worker) *worker.NodeHost {
	t.Helper()
	dir := t.TempDir()
	nh, err := worker.NewNodeHost(worker.HostOptions{Policy: pol, DefaultCwd: dir, Roots: []string{dir},
		StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nh.Close() })
	return nh
}

// A set holding one good and one broken module, through a real
// controller: the good module serves, and node.describe and
// node.modules.status show the refusal and its reason.
func TestWorkerServesGoodModuleBesideBrokenOne(t *testing.T) {
	m, mods := goodAndBrokenSet(t)
	ms, err := controller.NewModuleSet(m, mods)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := controller.New(controller.Config{
		Operators: []controller.OperatorCredential{{Name: "op", TokenHash: controller.HashToken(refusedOpToken),
			Scopes: []string{protocol.ScopeAdmin}}},
		NodeTokens: []controller.NodeCredential{{Name: "w1", TokenHash: controller.HashToken(nodeToken)}},
		ModuleSet:  ms, StateDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	url := "ws://" + ln.Addr().String() + "/ws"

	nh := nodeHost(t, &policies.Worker{})
	startWorker(t, worker.Config{ControllerURL: url, Name: "w1", ModuleCacheDir: filepath.Join(t.TempDir(), "cache"),
		LoadModules: nh.LoadModules})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	op, err := client.Dial(ctx, url, client.Options{Token: refusedOpToken})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	var nodeID string
	var d protocol.NodeDescription
	for ctx.Err() == nil { // the node fetches, compiles and reconnects
		raw, perr := op.Call(ctx, protocol.MethodNodeList, protocol.NodeListParams{})
		var l protocol.NodeListResult
		if perr == nil && json.Unmarshal(raw, &l) == nil && len(l.Nodes) == 1 {
			nodeID = l.Nodes[0].NodeID
			raw, perr = op.Call(ctx, protocol.MethodNodeDescribe, protocol.NodeDescribeParams{NodeID: nodeID})
			if d = (protocol.NodeDescription{}); perr == nil && json.Unmarshal(raw, &d) == nil && d.Online && d.ModuleSetDigest == m.Digest() {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(d.Modules) != 2 || d.Modules[0].Family != "hostinfo" || d.Modules[0].State != protocol.ModuleLoaded ||
		d.Modules[1].Family != "broken" || d.Modules[1].State != protocol.ModuleRefused ||
		!strings.HasPrefix(d.Modules[1].Reason, host.ReasonCompileFailed) || d.Modules[1].SHA256 != m.Modules[1].SHA256 {
		t.Fatalf("describe modules = %+v", d.Modules)
	}
	if _, ok := d.Methods["node.host.info"]; !ok {
		t.Fatalf("good module not advertised: %v", d.Methods)
	}
	raw, perr := op.Call(ctx, "node.host.info", map[string]string{"nodeId": nodeID})
	if perr != nil || !strings.Contains(string(raw), "cpuCount") {
		t.Fatalf("node.host.info: %s %v", raw, perr)
	}
	raw, perr = op.Call(ctx, protocol.MethodModulesStatus, protocol.ModulesStatusParams{})
	var st protocol.ModulesStatusResult
	if perr != nil || json.Unmarshal(raw, &st) != nil || len(st.Nodes) != 1 || !st.Nodes[0].Current ||
		len(st.Nodes[0].Refused) != 1 || st.Nodes[0].Refused[0].Family != "broken" {
		t.Fatalf("node.modules.status: %s %v", raw, perr)
	}
}

// setServer serves a module set over fakecontrol.
func setServer(t *testing.T, m moduleset.Manifest, mods map[string][]byte) *fakecontrol.Server {
	t.Helper()
	mj, _ := json.Marshal(m)
	bySHA := map[string][]byte{}
	for _, mod := range m.Modules {
		bySHA[mod.SHA256] = mods[mod.Family]
	}
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: nodeToken, ModuleSet: &protocol.ModuleSetRef{Digest: m.Digest()},
		Handle: func(_ *fakecontrol.Conn, req protocol.Request) (any, *protocol.Error) {
			switch req.Method {
			case protocol.MethodModulesManifest:
				return protocol.ModulesManifestResult{Digest: m.Digest(), Manifest: mj}, nil
			case protocol.MethodModulesFetch:
				var p protocol.ModulesFetchParams
				if perr := protocol.DecodeParams(req.Params, &p); perr != nil {
					return nil, perr
				}
				b := bySHA[p.SHA256]
				end := min(p.Offset+256<<10, int64(len(b)))
				return protocol.ModulesFetchResult{SHA256: p.SHA256, Offset: p.Offset, Length: end - p.Offset,
					Size: int64(len(b)), EOF: end == int64(len(b)), DataBase64: base64.StdEncoding.EncodeToString(b[p.Offset:end])}, nil
			}
			return nil, protocol.Errorf(protocol.CodeMethodNotFound, "no")
		}})
	t.Cleanup(srv.Close)
	return srv
}

// The node itself answers a method of a refused module UNAVAILABLE
// module_refused, reports every module's status in connect, and
// advertises only the methods its ceiling allows: with ceiling [read]
// node.host.info (capability hostinfo) is neither advertised nor run,
// with [hostinfo] it is both.
func TestWorkerReportsStatusesAndHonoursCeiling(t *testing.T) {
	m, mods := goodAndBrokenSet(t)
	for _, tc := range []struct {
		ceiling   []string
		advertise bool
	}{{[]string{"hostinfo"}, true}, {[]string{"read"}, false}} {
		t.Run(strings.Join(tc.ceiling, ","), func(t *testing.T) {
			srv := setServer(t, m, mods)
			pol := &policies.Worker{Capabilities: policies.StringSet{Set: true, Items: tc.ceiling}}
			nh := nodeHost(t, pol)
			startWorker(t, worker.Config{ControllerURL: srv.URL, ModuleCacheDir: filepath.Join(t.TempDir(), "cache"),
				LoadModules: nh.LoadModules, Capabilities: pol.Ceiling()})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			srv.NextNode(ctx) // before the set is loaded
			c, err := srv.NextNode(ctx)
			if err != nil {
				t.Fatal(err)
			}
			adv := c.Connect.Node
			if adv.ModuleSetDigest != m.Digest() || len(adv.Modules) != 2 || adv.Modules[0].State != protocol.ModuleLoaded ||
				adv.Modules[1].State != protocol.ModuleRefused || !strings.HasPrefix(adv.Modules[1].Reason, "compile_failed") {
				t.Fatalf("advertise = %+v", adv)
			}
			if _, ok := adv.Methods["node.host.info"]; ok != tc.advertise {
				t.Fatalf("node.host.info advertised = %v under %v", ok, tc.ceiling)
			}
			if _, ok := adv.Methods["node.broken.run"]; ok {
				t.Fatal("a refused module's method is advertised")
			}
			send := func(id, method string) protocol.InvokeResult {
				t.Helper()
				if err := c.SendEvent(protocol.EventInvokeRequest, protocol.InvokeRequest{InvokeID: id, NodeID: "n1",
					Method: method, Args: json.RawMessage(`{"nodeId":"n1"}`)}); err != nil {
					t.Fatal(err)
				}
				r, err := srv.NextResult(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			r := send("i1", "node.broken.run")
			if r.Error == nil || r.Error.Code != protocol.CodeUnavailable || r.Error.DomainCode() != protocol.DomainModuleRefused {
				t.Fatalf("refused module: %+v", r)
			}
			r = send("i2", "node.host.info")
			if tc.advertise && r.Error != nil {
				t.Fatalf("node.host.info: %+v", r.Error)
			}
			if !tc.advertise && (r.Error == nil || r.Error.DomainCode() != protocol.DomainCapabilityDenied) {
				t.Fatalf("node.host.info under %v: %+v", tc.ceiling, r)
			}
		})
	}
}
