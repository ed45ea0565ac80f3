package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lemon/policies"
	"lemon/policies/authority"
)

// deployDir is the repository's deploy/ directory (tests run in
// cmd/lemon/e2e).
var deployDir, _ = filepath.Abs(filepath.Join("..", "..", "..", "deploy"))

// TestDeployExamplePolicies runs deploy/controller.toml and
// deploy/worker.toml through `lemon policy check`, as docs/DEPLOY.md tells
// an operator to.
func TestDeployExamplePolicies(t *testing.T) {
	home := t.TempDir()
	for _, tc := range []struct{ kind, file, want string }{
		{"--controller", "controller.toml", `name = "admin"`},
		{"--worker", "worker.toml", `allowed_roots = ["/srv/lemon"]`},
	} {
		r := run(t, home, env(home), nil, "policy", "check", tc.kind, filepath.Join(deployDir, tc.file))
		if r.code != 0 || !strings.Contains(r.stdout, tc.want) {
			t.Fatalf("policy check %s %s: exit %d\nstdout: %s\nstderr: %s", tc.kind, tc.file, r.code, r.stdout, r.stderr)
		}
		// /srv/lemon need not exist on the test host: that warning is
		// expected (docs/POLICY.md); any other is a finding.
		for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			if strings.Contains(line, "warning") && !strings.Contains(line, "/srv/lemon is not an existing directory on this host") {
				t.Errorf("policy check %s: %s", tc.file, line)
			}
		}
	}
}

// TestDeployControllerEntries checks that each entry of
// deploy/controller.toml can do what its comment says: ci holds
// operator.admin (lemon run needs it) with a policy allowing
// node.process.run of make, go and git and denying the controller's
// decisions; enroll holds operator.pairing only.
func TestDeployControllerEntries(t *testing.T) {
	c, err := policies.LoadController(filepath.Join(deployDir, "controller.toml"))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]policies.OperatorToken{}
	for _, o := range c.Operators {
		byName[o.Name] = o
	}
	ci, enroll := byName["ci"], byName["enroll"]
	if !slices.Equal(ci.Scopes, []string{"operator.admin"}) || !slices.Equal(enroll.Scopes, []string{"operator.pairing"}) {
		t.Fatalf("ci scopes %q, enroll scopes %q", ci.Scopes, enroll.Scopes)
	}
	p := ci.OperatorPolicy().Policy
	if d := authority.Decide(p, authority.Method{Name: "node.process.run", Capability: "exec"}); d.Verdict != authority.Allow {
		t.Errorf("ci: node.process.run: %+v", d)
	}
	if !slices.Equal(p.AllowedCommands, []string{"git", "go", "make"}) {
		t.Errorf("ci: allowed_commands %q", p.AllowedCommands)
	}
	for _, m := range []string{"approval.decide", "node.pair.approve"} {
		if d := authority.Decide(p, authority.Method{Name: m, Class: "mutation"}); d.Verdict == authority.Allow {
			t.Errorf("ci: %s allowed", m)
		}
	}
}

// TestDeployUnitsVerify runs `systemd-analyze verify` on the units in
// deploy/, with ExecStart= pointed at the binary under test, and checks the
// hardening the units promise (docs/DEPLOY.md, "systemd units").
func TestDeployUnitsVerify(t *testing.T) {
	units := map[string][]string{
		"lemon-controller.service": {"DynamicUser=yes", "ProtectSystem=strict", "NoNewPrivileges=yes",
			"StateDirectory=lemon", "CapabilityBoundingSet=\n", "SystemCallFilter=@system-service", "Restart=on-failure"},
		"lemon-node.service": {"User=lemon", "ProtectSystem=strict", "NoNewPrivileges=yes", "StateDirectory=lemon-node",
			"ReadWritePaths=/srv/lemon", "Delegate=yes", "CapabilityBoundingSet=\n", "Restart=on-failure"},
	}
	dir := t.TempDir()
	for name, wants := range units {
		b, err := os.ReadFile(filepath.Join(deployDir, name))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, w := range wants {
			if !strings.Contains(text, "\n"+w) {
				t.Errorf("%s lacks %q", name, strings.TrimSpace(w))
			}
		}
		if strings.Count(text, "/usr/local/bin/lemon ") == 0 {
			t.Fatalf("%s: ExecStart does not run /usr/local/bin/lemon", name)
		}
		text = strings.ReplaceAll(text, "/usr/local/bin/lemon ", lemonBin+" ")
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the units' syntax is not verified here")
	}
	for name := range units {
		out, err := exec.Command(tool, "verify", filepath.Join(dir, name)).CombinedOutput()
		// verify exits 0 on unknown keys and bad values; any output is a finding.
		if err != nil || len(strings.TrimSpace(string(out))) != 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", name, err, out)
		}
	}
}
