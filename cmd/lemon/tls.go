package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"lemon/client"
	"lemon/client/tlsdev"
)

// `lemon tls dev` writes a local CA and a server certificate so wss:// can
// be tried in a minute (docs/DEPLOY.md, "wss in a minute").
func init() {
	registerCobra("tls", newTLSCommand)
}

const tlsDevLong = `Writes a local certificate authority (ca.pem, ca-key.pem) and a server
certificate for the given host names and addresses (server.pem,
server-key.pem) into DIR, then prints the flags that use them: --tls-cert
and --tls-key for the controller, --ca-file (or LEMON_CA_FILE) for nodes
and the CLI. Run again, it keeps the CA, so dialers that trust it keep
working, and issues a new server certificate. Keys are written 0600.

The CA is valid for 5 years and the server certificate for 1 year. It is
for development and private deployments; docs/DEPLOY.md, "TLS", covers a
real PKI.`

func newTLSCommand(stdout, stderr io.Writer) *cobra.Command {
	tls := &cobra.Command{
		Use:   "tls",
		Short: "TLS helpers: 'lemon tls dev' makes a local CA and a server certificate",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return usageError{msg: "tls needs a subcommand (dev)", hint: "run 'lemon tls --help'"}
		},
	}
	var dir string
	var hosts []string
	dev := &cobra.Command{
		Use:   "dev [--dir DIR] [--host NAME,...]",
		Short: "write a local CA and a server certificate for wss://, and print the flags to use them",
		Long:  tlsDevLong,
		Example: "  lemon tls dev\n" +
			"  lemon tls dev --dir /etc/lemon/tls --host controller.example,10.0.0.5",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return codeErr(runTLSDev(dir, hosts, stdout, stderr))
		},
	}
	dev.Flags().StringVar(&dir, "dir", "", "directory for the files (default ~/.lemon/tls)")
	dev.Flags().StringSliceVar(&hosts, "host", tlsdev.DefaultHosts, "host names and IP addresses the server certificate is for (comma-separated or repeated)")
	tls.AddCommand(dev)
	return tls
}

func runTLSDev(dir string, hosts []string, stdout, stderr io.Writer) int {
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			fmt.Fprintln(stderr, "lemon tls dev: no home directory: pass --dir")
			return 2
		}
		dir = filepath.Join(home, ".lemon", "tls")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		fmt.Fprintln(stderr, "lemon tls dev: bad --dir")
		return 2
	}
	for i := range hosts {
		hosts[i] = strings.TrimSpace(hosts[i])
	}
	if _, _, err := tlsdev.ParseHosts(hosts); err != nil {
		fmt.Fprintf(stderr, "lemon %v\n", err)
		return 2
	}
	f, err := tlsdev.Write(abs, hosts)
	if err != nil {
		fmt.Fprintf(stderr, "lemon %v\n", err)
		return 1
	}
	ca := "new CA"
	if f.CAReused {
		ca = "kept the CA"
	}
	host, listen := hosts[0], "127.0.0.1:7777"
	ip := net.ParseIP(host)
	if ip != nil && ip.To4() == nil {
		host = "[" + host + "]"
	}
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		// Reached from other machines; such a listen needs operator
		// tokens (LEMON_CONTROL_PLANE_OPERATOR_TOKEN or [[operators]]).
		listen = "0.0.0.0:7777"
	}
	fmt.Fprintf(stdout, `lemon tls dev: %s in %s; server certificate for %s, valid until %s.

Controller (wss://):
  lemon controller --listen %s --tls-cert %s --tls-key %s
or in controller.toml:
  [tls]
  cert_file = %s
  key_file = %s

Nodes and the CLI trust the CA with --ca-file, or the environment:
  export %s=%s
  lemon nodes --controller wss://%s:7777/ws --ca-file %s
  lemon node join --controller wss://%s:7777/ws --ca-file %s ...

Keep ca-key.pem on this machine; copy only ca.pem to the nodes.
`, ca, shellQuote(abs), strings.Join(hosts, ", "), time.Now().Add(tlsdev.ServerValidity).Format(time.DateOnly),
		listen, shellQuote(f.Cert), shellQuote(f.Key), tomlString(f.Cert), tomlString(f.Key),
		client.EnvCAFile, shellQuote(f.CA), host, shellQuote(f.CA), host, shellQuote(f.CA))
	return 0
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// letters, digits and /._-:@+,=.
func shellQuote(s string) string {
	safe := s != ""
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("/._-:@+,=", c)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// tomlString is s as a TOML string: a literal string when it holds no
// single quote or control character, else a basic string with escapes.
func tomlString(s string) string {
	if !strings.ContainsAny(s, "'\n\r\t") && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "'" + s + "'"
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
