package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"lemon/client"
)

// The web console (docs/CONSOLE.md) in a real headless Chromium, driven
// with chromedp, against `lemon dev`.

// chromiumPath finds the browser. Without one the test skips, unless CI
// is set: there it must run (.ci/run installs Debian's chromium).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("LEMON_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("CI is set and no chromium is installed (.ci/run installs it with apt-get install chromium)")
	}
	t.Skip("chromium is not installed (apt-get install chromium); the console browser test needs it")
	return ""
}

// startBrowser starts a headless Chromium with a fresh profile; t's
// cleanup stops it.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 8*time.Minute)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// consoleDev is `lemon dev` with extra operators: a read-only one and a
// pairing-only one (for a joining node).
type consoleDev struct {
	*devNode
	readToken, pairToken string
	// cautiousToken's node.host.info is held for approval.
	cautiousToken string
	base          string
}

func startConsoleDev(t *testing.T, name string) *consoleDev {
	t.Helper()
	root := t.TempDir()
	cd := &consoleDev{readToken: "lop_" + randHex(24), pairToken: "lop_" + randHex(24), cautiousToken: "lop_" + randHex(24)}
	ops := filepath.Join(root, "operators.toml")
	if err := os.WriteFile(ops, []byte(`[[operators]]
name = "viewer"
token_env = "LEMON_E2E_READ_TOKEN"
scopes = ["operator.read"]

[[operators]]
name = "joining-hosts"
token_env = "LEMON_E2E_PAIRING_TOKEN"
scopes = ["operator.pairing"]

[[operators]]
name = "cautious"
token_env = "LEMON_E2E_CAUTIOUS_TOKEN"
scopes = ["operator.read"]
[operators.policy]
require_approval = ["node.host.info"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &devNode{home: filepath.Join(root, "home"), token: "lop_" + randHex(24)}
	d.cwd = filepath.Join(d.home, "work")
	d.state = filepath.Join(d.home, "state")
	for _, dir := range []string{d.cwd, d.state} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(wazeroCache, filepath.Join(d.state, "wazero-cache")); err != nil {
		t.Fatal(err)
	}
	d.p = start(t, "lemon dev", d.cwd, env(d.home, "LEMON_CONTROL_PLANE_OPERATOR_TOKEN="+d.token,
		"LEMON_E2E_READ_TOKEN="+cd.readToken, "LEMON_E2E_PAIRING_TOKEN="+cd.pairToken, "LEMON_E2E_CAUTIOUS_TOKEN="+cd.cautiousToken),
		"dev", "--listen", "127.0.0.1:0", "--state", d.state, "--name", name, "--operators", ops)
	m := d.p.waitFor(t, devReadyRE, readyWait)
	d.url, d.controllerAddr, d.nodeName, d.nodeID, d.started = m[1], m[2], m[3], m[4], m[5]
	d.p.waitFor(t, regexp.MustCompile(`web console: http://`+regexp.QuoteMeta(d.controllerAddr)+`/ui/`), readyWait)
	cd.devNode = d
	cd.base = "http://" + d.controllerAddr
	return cd
}

// screenshots is where the console test saves one PNG per page:
// $LEMON_CONSOLE_SCREENSHOTS, else a new temporary directory that is kept
// for inspection (its path is logged; about 500 KB).
func screenshots(t *testing.T) string {
	if d := os.Getenv("LEMON_CONSOLE_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	d, err := os.MkdirTemp("", "lemon-console-screenshots-")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func shoot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// must runs steps, each bounded by a minute; on failure the page is in
// the message.
func must(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	for i, st := range steps {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := chromedp.Do(sctx, st)
		cancel()
		if err != nil {
			html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.documentElement.outerHTML`))
			t.Fatalf("%s (step %d): %v\n%s", what, i+1, err, html)
		}
	}
}

func runAction[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// eval runs a JavaScript expression (awaiting a promise) and returns its
// JSON value.
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitTrue reloads path until js is true, up to limit.
func waitTrue(t *testing.T, ctx context.Context, url, js string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		must(t, ctx, "open "+url, chromedp.Navigate(url))
		if eval[bool](t, ctx, js) {
			return
		}
		if time.Now().After(deadline) {
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %s stayed false for %s\n%s", url, js, limit, html)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func login(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	must(t, ctx, "log in",
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Submit(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("form.logout")))
}

// postStatus posts form fields from the page with fetch and returns the
// HTTP status.
func postStatus(t *testing.T, ctx context.Context, path string, fields map[string]string) int {
	t.Helper()
	b, _ := json.Marshal(fields)
	return eval[int](t, ctx, fmt.Sprintf(`fetch(%q, {method: "POST", body: new URLSearchParams(%s)}).then(r => r.status)`, path, b))
}

var pairCodeRE = regexp.MustCompile(`pairing code: ([A-Z0-9]{4}-[A-Z0-9]{4})`)

func TestConsoleInBrowser(t *testing.T) {
	ctx := startBrowser(t)
	const evil = `<img src=x onerror=alert(1)>`
	d := startConsoleDev(t, evil)
	shots := screenshots(t)
	t.Logf("screenshots in %s", shots)
	var dialogs atomic.Int32
	if err := chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs.Add(1)
			go chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}); err != nil {
		t.Fatal(err)
	}
	inert := func(where string) {
		t.Helper()
		if n := eval[int](t, ctx, `document.querySelectorAll("img").length`); n != 0 {
			t.Fatalf("%s: %d img elements were created", where, n)
		}
		if n := dialogs.Load(); n != 0 {
			t.Fatalf("%s: %d JavaScript dialogs opened", where, n)
		}
	}

	// Log in and see the live dev node, whose name is markup: it renders
	// as text.
	must(t, ctx, "login page", chromedp.Navigate(d.base+"/ui/nodes"), chromedp.WaitVisible(chromedp.CSS("#token")))
	if u := eval[string](t, ctx, `location.pathname`); u != "/ui/login" {
		t.Fatalf("without a session /ui/nodes went to %s", u)
	}
	shoot(t, ctx, shots, "login")
	login(t, ctx, d.base, d.token)
	waitTrue(t, ctx, d.base+"/ui/nodes",
		fmt.Sprintf(`!!document.querySelector('tr[data-node-id=%q] .state .ok')`, d.nodeID), time.Minute)
	if got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector('tr[data-node-id=%q] td.name a').textContent`, d.nodeID)); got != evil {
		t.Fatalf("node name shown as %q, want %q", got, evil)
	}
	inert("nodes")
	shoot(t, ctx, shots, "nodes")

	// Node detail: live node.host.info through the session, and the
	// node's audit records (the host.info call just made is one).
	must(t, ctx, "node detail", chromedp.Navigate(d.base+"/ui/node?id="+d.nodeID), chromedp.WaitVisible(chromedp.CSS("#hostinfo")))
	info := runAction(t, ctx, "host info", chromedp.Text(chromedp.CSS("#hostinfo")))
	var hi map[string]any
	if err := json.Unmarshal([]byte(info), &hi); err != nil || len(hi) == 0 {
		t.Fatalf("host info is not a JSON object: %q", info)
	}
	if got := eval[string](t, ctx, `document.getElementById("node-name").textContent`); got != evil {
		t.Fatalf("node page name %q", got)
	}
	inert("node detail")
	shoot(t, ctx, shots, "node")
	waitTrue(t, ctx, d.base+"/ui/node?id="+d.nodeID,
		`[...document.querySelectorAll("td")].some(td => td.textContent === "node.host.info")`, 30*time.Second)

	// Overview charts draw from the controller's metrics.
	must(t, ctx, "overview", chromedp.Navigate(d.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#c-online polyline")))
	// A sample is taken every 2 s; the first may predate the node.
	waitTrueHere(t, ctx, `document.getElementById("v-online").textContent === "1"`, 20*time.Second)
	shoot(t, ctx, shots, "overview")

	must(t, ctx, "module set", chromedp.Navigate(d.base+"/ui/modules"), chromedp.WaitVisible(chromedp.CSS("#pinned")))
	if n := eval[int](t, ctx, `document.querySelectorAll("#digests tbody tr").length`); n != 1 {
		t.Fatalf("module set groups: %d", n)
	}
	shoot(t, ctx, shots, "modules")

	// Audit tail with a filter.
	must(t, ctx, "audit", chromedp.Navigate(d.base+"/ui/audit"), chromedp.WaitVisible(chromedp.CSS("#audit tbody tr")),
		chromedp.SendKeys(chromedp.CSS(`#audit-filter input[name=method]`), "node.host.info"))
	waitTrueHere(t, ctx, `(() => { const r = [...document.querySelectorAll("#audit tbody tr")];
		return r.length > 0 && r.every(tr => tr.children[2].textContent === "node.host.info") })()`, 30*time.Second)
	shoot(t, ctx, shots, "audit")

	// A node with a pairing-only token asks to join; the pairing is
	// approved in the console and the node comes online.
	nh := filepath.Join(t.TempDir(), "web-2")
	ncwd, nstate := filepath.Join(nh, "work"), filepath.Join(nh, "state")
	for _, dir := range []string{ncwd, nstate} {
		os.MkdirAll(dir, 0o700)
	}
	os.Symlink(wazeroCache, filepath.Join(nstate, "wazero-cache"))
	node := start(t, "lemon node join", ncwd, env(nh, "LEMON_NODE_OPERATOR_TOKEN="+d.pairToken),
		"node", "join", "--controller", d.url, "--name", "web-2", "--pair", "--cwd", ncwd, "--state", nstate)
	code := node.waitFor(t, pairCodeRE, readyWait)[1]
	row := fmt.Sprintf(`tr[data-code=%q]`, code)
	waitTrue(t, ctx, d.base+"/ui/pairings", `!!document.querySelector('`+row+`')`, time.Minute)
	shoot(t, ctx, shots, "pairings")

	// Without its CSRF token the approve action is refused, and nothing
	// is decided.
	pid := eval[string](t, ctx, `document.querySelector('`+row+` input[name=pairingId]').value`)
	if st := postStatus(t, ctx, "/ui/pairings/approve", map[string]string{"pairingId": pid}); st != 403 {
		t.Fatalf("approve without CSRF: HTTP %d", st)
	}
	if st := postStatus(t, ctx, "/ui/pairings/approve", map[string]string{"pairingId": pid, "csrf": strings.Repeat("0", 64)}); st != 403 {
		t.Fatalf("approve with a wrong CSRF token: HTTP %d", st)
	}
	waitTrue(t, ctx, d.base+"/ui/pairings", `!!document.querySelector('`+row+` button.approve')`, 10*time.Second)

	must(t, ctx, "approve", chromedp.Click(chromedp.CSS(row+` button.approve`)), chromedp.WaitVisible(chromedp.CSS("#flash")))
	flash := runAction(t, ctx, "flash", chromedp.Text(chromedp.CSS("#flash")))
	if !strings.Contains(flash, "approved") || !strings.Contains(flash, "web-2") {
		t.Fatalf("after approve: %q", flash)
	}
	node.waitFor(t, regexp.MustCompile(`paired as web-2 \(node ID node-[0-9a-f]+\)`), readyWait)
	waitTrue(t, ctx, d.base+"/ui/nodes?q=web-2",
		`(() => { const r = document.querySelectorAll("#nodes tbody tr[data-node-id]"); return r.length === 1 && !!r[0].querySelector(".state .ok") })()`, readyWait)
	shoot(t, ctx, shots, "nodes-web-2")

	// A request held by an operator policy (require_approval) is approved
	// in the Approvals page, and the held call then completes.
	held := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c, err := client.Dial(cctx, d.url, client.Options{Token: d.cautiousToken, ClientID: "e2e-cautious"})
		if err != nil {
			held <- err
			return
		}
		defer c.Close()
		raw, perr := c.Call(cctx, "node.host.info", map[string]string{"nodeId": d.nodeID})
		if perr != nil {
			held <- perr
			return
		}
		if !strings.Contains(string(raw), "cpuCount") {
			held <- fmt.Errorf("host info: %s", raw)
			return
		}
		held <- nil
	}()
	hrow := `tr[data-principal="cautious"][data-method="node.host.info"]`
	waitTrue(t, ctx, d.base+"/ui/approvals", `!!document.querySelector('`+hrow+` button.approve')`, time.Minute)
	shoot(t, ctx, shots, "approvals")
	must(t, ctx, "approve held", chromedp.Click(chromedp.CSS(hrow+` button.approve`)), chromedp.WaitVisible(chromedp.CSS("#flash")))
	if f := runAction(t, ctx, "flash", chromedp.Text(chromedp.CSS("#flash"))); !strings.Contains(f, "approved") {
		t.Fatalf("after approving the held request: %q", f)
	}
	select {
	case err := <-held:
		if err != nil {
			t.Fatalf("the held call: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the approved call did not complete")
	}

	// Log out, then log in with the read-only token: no approve button
	// anywhere, and its direct POSTs (with a valid CSRF token) are refused.
	must(t, ctx, "log out", chromedp.Click(chromedp.CSS("form.logout button")), chromedp.WaitVisible(chromedp.CSS("#token")))
	if st := eval[int](t, ctx, `fetch("/ui/nodes", {redirect: "manual"}).then(r => r.type === "opaqueredirect" ? 303 : r.status)`); st != 303 {
		t.Fatalf("after logout /ui/nodes: %d", st)
	}
	node3 := start(t, "lemon node join", ncwd, env(nh, "LEMON_NODE_OPERATOR_TOKEN="+d.pairToken),
		"node", "join", "--controller", d.url, "--name", "web-3", "--pair", "--cwd", ncwd, "--state", filepath.Join(nh, "state3"))
	code3 := node3.waitFor(t, pairCodeRE, readyWait)[1]
	login(t, ctx, d.base, d.readToken)
	for _, p := range []string{"/ui/", "/ui/nodes", "/ui/pairings", "/ui/approvals", "/ui/modules", "/ui/node?id=" + d.nodeID} {
		must(t, ctx, "reader "+p, chromedp.Navigate(d.base+p), chromedp.WaitReady(chromedp.CSS("body")))
		if n := eval[int](t, ctx, `document.querySelectorAll("button.approve, button.reject, a[href='/ui/pairings']").length`); n != 0 {
			t.Fatalf("reader sees %d approve/reject controls on %s", n, p)
		}
		if strings.Contains(eval[string](t, ctx, `document.body.textContent`), code3) {
			t.Fatalf("reader sees the pairing code on %s", p)
		}
		if p == "/ui/pairings" {
			shoot(t, ctx, shots, "reader-pairings")
		}
	}
	csrf := eval[string](t, ctx, `document.querySelector("form.logout input[name=csrf]").value`)
	for _, p := range []string{"/ui/pairings/approve", "/ui/pairings/reject"} {
		if st := postStatus(t, ctx, p, map[string]string{"pairingId": code3, "csrf": csrf}); st != 403 {
			t.Fatalf("reader POST %s: HTTP %d", p, st)
		}
	}
	if st := postStatus(t, ctx, "/ui/approvals/decide", map[string]string{"approvalId": "a-1", "decision": "approve", "csrf": csrf}); st != 403 {
		t.Fatalf("reader POST approvals: HTTP %d", st)
	}
	if node3.exited() || strings.Contains(node3.output(), "paired as") {
		t.Fatalf("the reader's refused POSTs decided the pairing:\n%s", node3.output())
	}
	inert("reader")
	for _, p := range []*proc{d.p, node, node3} {
		for _, tok := range []string{d.token, d.readToken, d.pairToken, d.cautiousToken} {
			if strings.Contains(p.output(), tok) {
				t.Fatalf("%s printed an operator token", p.name)
			}
		}
	}
}

// waitTrueHere polls js on the current page (no reload) up to limit.
func waitTrueHere(t *testing.T, ctx context.Context, js string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !eval[bool](t, ctx, js) {
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed false for %s", js, limit)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
