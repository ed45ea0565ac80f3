package pairinge2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"lemon/protocol"
	"lemon/worker"
)

// TestPairRestartReconnect: a node pairs (`lemon node join --pair`, then
// `lemon nodes approve CODE`), its token file is 0600 in a 0700 directory,
// it survives a controller restart (same --state) with the session it
// holds, and a restarted node joins with its stored token alone.
// `lemon nodes` lists it; `lemon nodes rename` renames it.
func TestPairRestartReconnect(t *testing.T) {
	h := newHarness(t)
	h.startController()
	a := h.newNodeHome("machine-a")
	// A store directory left looser than 0700 is tightened.
	if err := os.MkdirAll(a.store().Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(a.store().Dir, 0o755)

	node := h.startNode("node a", a, "worker-1", true)
	code := node.waitFor(codeRE, startWait)[1]
	// The pending pairing is listed with its code.
	list := h.mustCLI("nodes")
	if !regexp.MustCompile(`(?m)^` + code + `\s+new\s+pending\s+worker-1\s`).MatchString(list) {
		t.Fatalf("lemon nodes does not list the pending pairing %s:\n%s", code, list)
	}
	// Codes are accepted in any case and without the dash.
	out := h.mustCLI("nodes", "approve", strings.ToLower(strings.ReplaceAll(code, "-", "")))
	if !strings.Contains(out, `approved: node "worker-1"`) {
		t.Fatalf("approve output: %q", out)
	}
	m := node.waitFor(pairedRE, startWait)
	rec := h.loadRecord(a, m[2])
	if rec.NodeID != m[2] || rec.Name != "worker-1" || rec.ControllerURL != h.url || rec.SessionGeneration != 1 ||
		!rec.SessionValid(time.Now()) || rec.SessionExpiresAtMs > time.Now().Add(protocol.SessionTTL).UnixMilli() {
		t.Fatalf("stored record: %s gen %d expires %d", rec, rec.SessionGeneration, rec.SessionExpiresAtMs)
	}
	checkStoreModes(t, a, rec.NodeID)

	h.waitOnline(rec.NodeID, node)
	if cwd := h.hostInfo(rec.NodeID); cwd != a.cwd {
		t.Fatalf("node.host.info answered from %s, want %s", cwd, a.cwd)
	}
	wantNodeRow(t, h.mustCLI("nodes"), "worker-1", rec.NodeID, "online")

	// Controller restart: the running node reconnects with the session it
	// holds; it does not pair again.
	h.restartController()
	h.waitOnline(rec.NodeID, node)
	if cwd := h.hostInfo(rec.NodeID); cwd != a.cwd {
		t.Fatalf("after restart node.host.info answered from %s", cwd)
	}
	if n := node.count("connected to controller"); n < 2 {
		t.Fatalf("node connected %d times across a controller restart\n%s", n, node.out.String())
	}
	if n := node.count("pairing code:"); n != 1 {
		t.Fatalf("node showed %d pairing codes", n)
	}

	// Node restart: no --pair and no token in the environment; the stored
	// session is used.
	if code := node.stop(); code != 0 {
		t.Fatalf("node exit %d\n%s", code, node.out.String())
	}
	again := h.startNode("node a (restarted)", a, "worker-1", false)
	h.waitOnline(rec.NodeID, again)
	if cwd := h.hostInfo(rec.NodeID); cwd != a.cwd {
		t.Fatalf("restarted node answered from %s", cwd)
	}
	if strings.Contains(again.out.String(), "pairing") {
		t.Fatalf("restarted node paired again:\n%s", again.out.String())
	}
	if cur := h.loadRecord(a, rec.NodeID); cur.SessionToken != rec.SessionToken || cur.SessionGeneration != 1 {
		t.Fatal("the stored session changed without a re-pairing")
	}

	// lemon nodes rename: trimmed, listed under the new name, durable.
	out = h.mustCLI("nodes", "rename", rec.NodeID, "  build-box  ")
	if want := fmt.Sprintf("renamed %s to %q\n", rec.NodeID, "build-box"); out != want {
		t.Fatalf("rename output %q, want %q", out, want)
	}
	wantNodeRow(t, h.mustCLI("nodes"), "build-box", rec.NodeID, "online")
	_, errOut, exit := h.operatorCLI("nodes", "rename", "node-"+strings.Repeat("0", 32), "other")
	if exit != 1 || !strings.Contains(errOut, `"code":"NOT_FOUND"`) {
		t.Fatalf("rename of an unknown node: exit %d, stderr %q", exit, errOut)
	}
	h.restartController()
	h.waitOnline(rec.NodeID, again)
	// --json is flat: {"nodes":[...]}, node.list's own shape.
	var listed protocol.NodeListResult
	if err := json.Unmarshal([]byte(h.mustCLI("nodes", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	if n := listed.Nodes; len(n) != 1 || n[0].NodeID != rec.NodeID || n[0].Name != "build-box" ||
		n[0].Identity != protocol.NodeIdentityPaired || !n[0].Online {
		t.Fatalf("lemon nodes --json after restart: %+v", n)
	}
}

// checkStoreModes: ~/.lemon/nodes/execution is 0700 and holds exactly the
// node's record file, mode 0600 (the pending-pairing file is gone).
func checkStoreModes(t *testing.T, n *nodeHome, nodeID string) {
	t.Helper()
	st := n.store()
	fi, err := os.Stat(st.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("token store directory mode %o, want 700", fi.Mode().Perm())
	}
	entries, err := os.ReadDir(st.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != filepath.Base(st.RecordPath(nodeID)) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("token store holds %v, want only %s", names, filepath.Base(st.RecordPath(nodeID)))
	}
	fi, err = os.Stat(st.RecordPath(nodeID))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %o, want 600", fi.Mode().Perm())
	}
}

// wantNodeRow finds the `lemon nodes` table row of a paired node.
func wantNodeRow(t *testing.T, table, name, nodeID, status string) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s+` + nodeID + `\s+` + status + `\s+paired\b`)
	if !re.MatchString(table) {
		t.Fatalf("lemon nodes has no row %q %s %s paired:\n%s", name, nodeID, status, table)
	}
}

// TestRepairRevokesOldToken: re-pairing (with the stored recovery
// credential, no operator needed) revokes the old session: the node
// process holding it is disconnected and refused, a raw client presenting
// the old token is refused, a copy of the old token file is useless, and
// a live socket of the revoked session is closed with 4002.
func TestRepairRevokesOldToken(t *testing.T) {
	h := newHarness(t)
	h.startController()
	a := h.newNodeHome("machine-a")
	n1, old := h.pairNew("node a", a, "worker-1")
	h.waitOnline(old.NodeID, n1)
	oldFile, err := os.ReadFile(a.store().RecordPath(old.NodeID))
	if err != nil {
		t.Fatal(err)
	}

	// Re-pair while n1 still serves with the old session.
	n2 := h.startNode("node a (re-pair)", a, "worker-1", true)
	if m := n2.waitFor(pairedRE, startWait); m[2] != old.NodeID || m[1] != "worker-1" {
		t.Fatalf("re-paired as %s %s, want worker-1 %s", m[1], m[2], old.NodeID)
	}
	if strings.Contains(n2.out.String(), "pairing code:") {
		t.Fatal("a recovery re-pairing waited for an operator")
	}
	if code := n1.exitCode(); code != 1 || !strings.Contains(n1.out.String(), "this session was revoked by a newer pairing of the same node") {
		t.Fatalf("old node: exit %d\n%s", code, n1.out.String())
	}
	// The recovery credential rotated with the session.
	cur := h.loadRecord(a, old.NodeID)
	if cur.SessionToken == old.SessionToken || cur.SessionGeneration != old.SessionGeneration+1 ||
		cur.RecoveryCredential == "" || cur.RecoveryCredential == old.RecoveryCredential {
		t.Fatalf("re-paired record: gen %d (old %d), new token %v, same recovery credential %v", cur.SessionGeneration,
			old.SessionGeneration, cur.SessionToken != old.SessionToken, cur.RecoveryCredential == old.RecoveryCredential)
	}
	h.waitOnline(old.NodeID, n2)
	if cwd := h.hostInfo(old.NodeID); cwd != a.cwd {
		t.Fatalf("node.host.info answered from %s", cwd)
	}

	// The old token on a raw client: refused.
	if _, err := h.dialNode(old.SessionToken, old.NodeID); err == nil {
		t.Fatal("the old session token was accepted")
	} else {
		wantRefused(t, err, protocol.DomainSessionRevoked)
	}
	// A copy of the old token file on another machine: refused before it
	// ever connects.
	b := h.newNodeHome("machine-b")
	writeRecordFile(t, b, old.NodeID, oldFile)
	stolen := h.startNode("node b (old token file)", b, "worker-1", false)
	if code := stolen.exitCode(); code != 1 || !strings.Contains(stolen.out.String(), "revoked") ||
		strings.Contains(stolen.out.String(), "connected to controller") {
		t.Fatalf("node with the old token file: exit %d\n%s", code, stolen.out.String())
	}
	if n2.exited() {
		t.Fatalf("the current node stopped:\n%s", n2.out.String())
	}

	// The socket of a session that a re-pairing revokes is closed with 4002.
	if code := n2.stop(); code != 0 {
		t.Fatalf("node exit %d", code)
	}
	raw, err := h.dialNode(cur.SessionToken, cur.NodeID)
	if err != nil {
		t.Fatalf("current session refused: %v", err)
	}
	n3 := h.startNode("node a (second re-pair)", a, "worker-1", true)
	n3.waitFor(pairedRE, startWait)
	select {
	case <-raw.Done():
	case <-time.After(startWait):
		t.Fatal("the revoked session's socket stayed open")
	}
	if code := closeCode(raw.Err()); code != 4002 {
		t.Fatalf("revoked socket closed with %d (%v), want 4002", code, raw.Err())
	}
	_, err = h.dialNode(cur.SessionToken, cur.NodeID)
	wantRefused(t, err, protocol.DomainSessionRevoked)
	h.loadRecord(a, cur.NodeID)
	h.waitOnline(cur.NodeID, n3)
}

func writeRecordFile(t *testing.T, n *nodeHome, nodeID string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(n.store().Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.store().RecordPath(nodeID), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// closeCode is the WebSocket close code behind a client connection error.
func closeCode(err error) int {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return 0
}

// writeOutcome is one node.fs.write call: the directory of the worker that
// answered, or the error code.
type writeOutcome struct {
	path   string
	dir    string
	code   string
	domain string
}

// writeMany sends node.fs.write for files prefix-NNN (relative paths land
// in the answering worker's default cwd) from 4 concurrent callers, until
// at least min calls are done and, when both is set, both workers have
// answered or until has passed (at most max calls): with both, once min
// calls are started no call is started after until.
func (h *harness) writeMany(nodeID, prefix string, min, max int, dirs []string, both bool, until time.Time) []writeOutcome {
	h.t.Helper()
	c := h.operator()
	out := make([]writeOutcome, max)
	var mu sync.Mutex
	answered := map[string]int{}
	next := 0
	enough := func() bool {
		if next < min {
			return false
		}
		return !both || (answered[dirs[0]] > 0 && answered[dirs[1]] > 0) || !time.Now().Before(until)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				mu.Lock()
				if next >= max || enough() {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				name := fmt.Sprintf("%s-%04d", prefix, i)
				data := base64.StdEncoding.EncodeToString([]byte(name))
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				raw, perr := c.Call(ctx, "node.fs.write", protocol.FSWriteParams{NodeID: nodeID, Path: name, DataBase64: &data})
				cancel()
				o := writeOutcome{path: name}
				if perr != nil {
					o.code, o.domain = perr.Code, perr.DomainCode()
				} else {
					var res protocol.FSWriteResult
					if err := json.Unmarshal(raw, &res); err != nil || filepath.Base(res.Path) != name {
						h.t.Errorf("node.fs.write %s: payload %s", name, raw)
					}
					o.dir = filepath.Dir(res.Path)
				}
				mu.Lock()
				out[i] = o
				if o.dir != "" {
					answered[o.dir]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out[:next]
}

// TestCloneNeverServedTwice: two workers present one identity (machine b
// runs a copy of machine a's token file). The newer connection replaces
// the older (4001), which backs off instead of swapping straight back;
// every request is executed by at most one of them and each answer comes
// from the worker that executed it. Then
// machine a re-pairs: b's copy is a stale session, b is refused and gets
// no request at all.
func TestCloneNeverServedTwice(t *testing.T) {
	h := newHarness(t)
	h.startController()
	a := h.newNodeHome("machine-a")
	na, rec := h.pairNew("node a", a, "worker-1")
	h.waitOnline(rec.NodeID, na)
	file, err := os.ReadFile(a.store().RecordPath(rec.NodeID))
	if err != nil {
		t.Fatal(err)
	}
	b := h.newNodeHome("machine-b")
	writeRecordFile(t, b, rec.NodeID, file)
	// A replaced worker waits between half and all of its longest backoff
	// before taking the identity back (worker.Run, res.replaced); `lemon
	// node join` leaves worker.Config.Backoff at its defaults (30 s cap),
	// so a stays away for at least holdOff = 15 s after the controller
	// replaces it. takeover is taken before b even starts, so it is a lower
	// bound of that moment: until takeover+holdOff only b may serve. The
	// writes stop starting at takeover+observe (10 s), leaving 5 s for the
	// calls in flight to be routed; 200 writes are always made (they take
	// well under the remaining window even on a loaded machine).
	holdOff := worker.Backoff{}.Ceiling(64) / 2
	observe := holdOff * 2 / 3
	takeover := time.Now()
	nb := h.startNode("node b (clone)", b, "worker-1", false)
	nb.waitFor(regexp.MustCompile("connected to controller"), onlineWait)

	dirs := []string{a.cwd, b.cwd}
	res := h.writeMany(rec.NodeID, "clone", 200, 2000, dirs, true, takeover.Add(observe))
	writePhase := time.Since(takeover)
	okBy := map[string]int{}
	failed := 0
	for _, o := range res {
		inA, inB := exists(filepath.Join(a.cwd, o.path)), exists(filepath.Join(b.cwd, o.path))
		if inA && inB {
			t.Errorf("%s was executed by both workers", o.path)
		}
		switch {
		case o.dir != "":
			okBy[o.dir]++
			if o.dir != a.cwd && o.dir != b.cwd {
				t.Errorf("%s answered from %s", o.path, o.dir)
			}
			if !exists(filepath.Join(o.dir, o.path)) || (o.dir == a.cwd && inB) || (o.dir == b.cwd && inA) {
				t.Errorf("%s: answered by %s, which did not execute it", o.path, o.dir)
			}
		case o.code == protocol.CodeUnavailable && (o.domain == protocol.DomainNodeDisconnected || o.domain == protocol.DomainNodeOffline):
			failed++ // the node was being replaced; a retry-safe refusal or a lost answer
		default:
			t.Errorf("%s: unexpected error %s %s", o.path, o.code, o.domain)
		}
	}
	// The newest connection (b) replaced a; a replaced worker waits half
	// to all of the longest backoff before taking the identity back, so
	// the copies do not keep swapping: b answers, a executes nothing.
	if okBy[b.cwd] == 0 || okBy[a.cwd] != 0 {
		t.Fatalf("the replaced worker must back off (at least %s) while the newer one serves: a %d, b %d, failed %d; write phase ended %s after b started",
			holdOff, okBy[a.cwd], okBy[b.cwd], failed, writePhase.Round(time.Millisecond))
	}
	// Each worker's own audit log: one fs.write host call per request it
	// executed, at least one per file it holds.
	if err := na.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	na.exitCode()
	filesA, filesB := countFiles(t, a.cwd, "clone-"), countFiles(t, b.cwd, "clone-")
	auditA, auditB := na.count("method=node.fs.write"), nb.count("method=node.fs.write")
	if auditA < filesA || auditB < filesB || auditA+auditB > len(res) {
		t.Fatalf("audit a %d (files %d), b %d (files %d), requests %d", auditA, filesA, auditB, filesB, len(res))
	}
	t.Logf("%d writes with two workers on one identity (write phase ended %s after b started; hold-off %s): a answered %d, b %d, %d failed over with node_disconnected/node_offline; swaps: a connected %d times, b %d",
		len(res), writePhase.Round(time.Millisecond), holdOff, okBy[a.cwd], okBy[b.cwd], failed, na.count("connected to controller"), nb.count("connected to controller"))

	// Machine a re-pairs: b's copy now holds a revoked session.
	na2 := h.startNode("node a (re-pair)", a, "worker-1", true)
	na2.waitFor(pairedRE, startWait)
	if code := nb.exitCode(); code != 1 || !strings.Contains(nb.out.String(), "revoked") {
		t.Fatalf("stale clone: exit %d\n%s", code, nb.out.String())
	}
	h.loadRecord(a, rec.NodeID)
	h.waitOnline(rec.NodeID, na2)
	auditB = nb.count("method=node.fs.write")
	res = h.writeMany(rec.NodeID, "stale", 100, 100, dirs, false, time.Time{})
	for _, o := range res {
		if o.dir != a.cwd {
			t.Errorf("%s: answered by %q (%s %s), want the current session on a", o.path, o.dir, o.code, o.domain)
		}
	}
	if n := countFiles(t, b.cwd, "stale-"); n != 0 {
		t.Fatalf("the stale clone executed %d requests", n)
	}
	if n := countFiles(t, a.cwd, "stale-"); n != len(res) {
		t.Fatalf("the current node executed %d of %d requests", n, len(res))
	}
	if n := nb.count("method=node.fs.write"); n != auditB {
		t.Fatalf("the stale clone's log shows %d more invocations", n-auditB)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func countFiles(t *testing.T, dir, prefix string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			n++
		}
	}
	return n
}

// TestReplayedChallengeRefused runs the pairing protocol on a raw operator
// connection: a challenge superseded by a fresh one is refused, the
// exchanged challenge cannot be replayed (also after a controller
// restart), and the consumed pairing is gone.
func TestReplayedChallengeRefused(t *testing.T) {
	h := newHarness(t)
	h.startController()
	methods := map[string]int{methodHostInfo: 1}
	// The joining host's pairing-only token (an admin's would be approved at once).
	raw, perr := h.callWith(h.pairToken, protocol.MethodPairRequest,
		protocol.PairRequestParams{Name: "replay-1", NodeType: protocol.NodeTypeExecution, Methods: methods})
	req := mustDecode[protocol.PairRequestResult](t, raw, perr)
	h.addSecret("request secret", req.RequestSecret)
	if req.Status != protocol.PairStatusPending || req.Challenge != "" {
		t.Fatalf("new pairing: status %s, challenge given %v", req.Status, req.Challenge != "")
	}
	h.mustCLI("nodes", "approve", req.Code)
	poll := func() protocol.PairRequestResult {
		raw, perr := h.callWith(h.pairToken, protocol.MethodPairRequest,
			protocol.PairRequestParams{PairingID: req.PairingID, RequestSecret: req.RequestSecret})
		r := mustDecode[protocol.PairRequestResult](t, raw, perr)
		if r.Status != protocol.PairStatusApproved || r.Challenge == "" || r.NodeID == "" || r.RequestSecret != "" {
			t.Fatalf("poll: status %s, challenge %v, node %q, request secret repeated %v", r.Status, r.Challenge != "", r.NodeID, r.RequestSecret != "")
		}
		h.addSecret("challenge", r.Challenge)
		return r
	}
	first, second := poll(), poll()
	exchange := func(ch string) (json.RawMessage, *protocol.Error) {
		return h.call(protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: ch})
	}
	wantErr := func(what string, _ json.RawMessage, perr *protocol.Error, code, domain string) {
		t.Helper()
		if perr == nil || perr.Code != code || perr.DomainCode() != domain {
			t.Fatalf("%s: got %v, want %s %s", what, perr, code, domain)
		}
	}
	raw, perr = exchange(first.Challenge)
	wantErr("superseded challenge", raw, perr, protocol.CodeUnauthorized, protocol.DomainChallengeInvalid)
	raw, perr = exchange(second.Challenge)
	sess := mustDecode[protocol.ConnectChallengeResult](t, raw, perr)
	h.addSecret("session token", sess.SessionToken)
	h.addSecret("recovery credential", sess.RecoveryCredential)
	if sess.NodeID != second.NodeID || sess.Name != "replay-1" || sess.SessionGeneration != 1 {
		t.Fatalf("session: node %s name %q gen %d", sess.NodeID, sess.Name, sess.SessionGeneration)
	}
	raw, perr = exchange(second.Challenge)
	wantErr("replayed challenge", raw, perr, protocol.CodeUnauthorized, protocol.DomainChallengeInvalid)
	raw, perr = h.call(protocol.MethodPairRequest, protocol.PairRequestParams{PairingID: req.PairingID, RequestSecret: req.RequestSecret})
	wantErr("poll of a consumed pairing", raw, perr, protocol.CodeNotFound, protocol.DomainPairingNotFound)
	if _, errOut, code := h.operatorCLI("nodes", "approve", req.Code); code != 1 || !strings.Contains(errOut, protocol.DomainPairingNotFound) {
		t.Fatalf("approve of a consumed pairing: exit %d %q", code, errOut)
	}

	h.restartController()
	raw, perr = exchange(second.Challenge)
	wantErr("replayed challenge after a restart", raw, perr, protocol.CodeUnauthorized, protocol.DomainChallengeInvalid)
	// The session the challenge bought works, once.
	if _, err := h.dialNode(sess.SessionToken, sess.NodeID); err != nil {
		t.Fatalf("session refused: %v", err)
	}
	for _, n := range h.nodeList() {
		if n.NodeID == sess.NodeID && !n.Online {
			t.Fatal("node not online")
		}
	}
}

// TestExpiredSessionRepairKeepsID: with `lemon controller --session-ttl
// 2s`, a paired node's session expires: the controller refuses it
// (session_expired, also after a restart), `lemon node join` says to
// re-pair, and `--pair` recovers the same node ID and name without an
// operator.
func TestExpiredSessionRepairKeepsID(t *testing.T) {
	h := newHarness(t)
	const ttl = 2 * time.Second
	h.startController("--session-ttl", ttl.String())
	a := h.newNodeHome("machine-a")
	// The controller sets expires = (its clock at the challenge exchange,
	// in whole ms) + ttl. The exchange happens somewhere between before and
	// after, however long starting the node and `lemon nodes approve` take
	// under load, so the stored expiry is bounded by both, in ms (UnixMilli
	// truncates, as the controller's clock does).
	before := time.Now()
	n1, rec := h.pairNew("node a", a, "worker-exp")
	after := time.Now()
	lo, hi := before.UnixMilli()+ttl.Milliseconds(), after.UnixMilli()+ttl.Milliseconds()
	if exp := rec.SessionExpiresAtMs; exp < lo || exp > hi {
		t.Fatalf("session expires at %d ms, want within [%d, %d] (exchange time + --session-ttl %s; pairing took %s)",
			exp, lo, hi, ttl, after.Sub(before))
	}
	n1.stop()
	time.Sleep(time.Until(time.UnixMilli(rec.SessionExpiresAtMs)) + 100*time.Millisecond)

	_, err := h.dialNode(rec.SessionToken, rec.NodeID)
	wantRefused(t, err, protocol.DomainSessionExpired)
	expired := h.startNode("node a (expired)", a, "worker-exp", false)
	if code := expired.exitCode(); code != 1 || !strings.Contains(expired.out.String(), "the stored session has expired: re-run with --pair") {
		t.Fatalf("node with an expired session: exit %d\n%s", code, expired.out.String())
	}

	h.restartController() // the default TTL again; the expired session stays expired
	_, err = h.dialNode(rec.SessionToken, rec.NodeID)
	wantRefused(t, err, protocol.DomainSessionExpired)

	n2 := h.startNode("node a (re-pair)", a, "worker-exp", true)
	m := n2.waitFor(pairedRE, startWait)
	if m[1] != "worker-exp" || m[2] != rec.NodeID {
		t.Fatalf("re-paired as %s %s, want worker-exp %s", m[1], m[2], rec.NodeID)
	}
	if strings.Contains(n2.out.String(), "pairing code:") {
		t.Fatal("a recovery re-pairing waited for an operator")
	}
	cur := h.loadRecord(a, rec.NodeID)
	if cur.SessionGeneration != rec.SessionGeneration+1 || !cur.SessionValid(time.Now().Add(time.Hour)) {
		t.Fatalf("re-paired session: gen %d, expires %d", cur.SessionGeneration, cur.SessionExpiresAtMs)
	}
	h.waitOnline(rec.NodeID, n2)
	if cwd := h.hostInfo(rec.NodeID); cwd != a.cwd {
		t.Fatalf("node.host.info answered from %s", cwd)
	}
	nodes := h.nodeList()
	if len(nodes) != 1 || nodes[0].NodeID != rec.NodeID || nodes[0].Name != "worker-exp" {
		t.Fatalf("registry after re-pairing: %+v", nodes)
	}
}

// TestPairingSurvivesControllerRestart: a pending pairing is durable; the
// joining node's dropped connection resumes the same pairing (the same
// code), and approving it after the restart completes the join.
func TestPairingSurvivesControllerRestart(t *testing.T) {
	h := newHarness(t)
	h.startController()
	a := h.newNodeHome("machine-a")
	node := h.startNode("node a", a, "worker-1", true)
	code := node.waitFor(codeRE, startWait)[1]
	h.restartController()
	h.mustCLI("nodes", "approve", code)
	m := node.waitFor(pairedRE, startWait)
	if n := node.count("pairing code:"); n != 1 {
		t.Fatalf("the node showed %d pairing codes; the interrupted pairing should resume\n%s", n, node.out.String())
	}
	h.loadRecord(a, m[2])
	h.waitOnline(m[2], node)
	checkStoreModes(t, a, m[2])
}

// TestPairingOperatorCredentialErrors: a missing or wrong operator token
// is reported by name, never echoed, and nothing is stored.
func TestPairingOperatorCredentialErrors(t *testing.T) {
	h := newHarness(t)
	h.startController()
	a := h.newNodeHome("machine-a")
	args := []string{"node", "join", "--pair", "--controller", h.url, "--name", "worker-1", "--cwd", a.cwd, "--state", a.state}

	_, errOut, code := h.run("node join without an operator token", baseEnv(a.home), args...)
	if code != 1 || !strings.Contains(errOut, "pairing needs an operator token: set LEMON_NODE_OPERATOR_TOKEN") {
		t.Fatalf("no operator token: exit %d %q", code, errOut)
	}
	wrong := "lop_wrong_" + randHex(16)
	h.addSecret("wrong operator token", wrong)
	_, errOut, code = h.run("node join with a wrong operator token", baseEnv(a.home, "LEMON_NODE_OPERATOR_TOKEN="+wrong), args...)
	if code != 1 || !strings.Contains(errOut, "the controller did not accept the operator token in LEMON_NODE_OPERATOR_TOKEN") {
		t.Fatalf("wrong operator token: exit %d %q", code, errOut)
	}
	if entries, err := os.ReadDir(a.store().Dir); err == nil && len(entries) != 0 {
		t.Fatalf("a refused pairing left %d files in the token store", len(entries))
	}
	// Without --pair and without a stored session the node says how to join.
	_, errOut, code = h.run("node join without a stored session", baseEnv(a.home),
		"node", "join", "--controller", h.url, "--name", "worker-1", "--cwd", a.cwd, "--state", a.state)
	if code != 1 || !strings.Contains(errOut, "no node token: set LEMON_NODE_TOKEN, or pair this node with --pair") {
		t.Fatalf("no stored session: exit %d %q", code, errOut)
	}
}
