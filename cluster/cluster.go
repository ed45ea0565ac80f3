// Package cluster runs the NATS engine controllers federate on
// (docs/CLUSTER.md): an embedded nats-server per controller, with
// JetStream (its store under the controller's state directory) and
// authenticated cluster routes to the peer controllers, or a connection
// to an external NATS cluster.
package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// SecretEnv is the environment variable holding the cluster secret;
// SecretFileEnv names a file holding it (docs/CLUSTER.md, "Security").
const (
	SecretEnv     = "LEMON_CLUSTER_SECRET"
	SecretFileEnv = "LEMON_CLUSTER_SECRET_FILE"
	// MinSecretBytes and MaxSecretBytes bound the secret's length.
	MinSecretBytes = 16
	MaxSecretBytes = 512
	// routeUser is the user name routes and clients authenticate as; the
	// secret is the password.
	routeUser = "lemon"
)

// ErrNoSecret is returned when cluster mode has no secret configured.
var ErrNoSecret = errors.New("cluster: a cluster secret is required (set " + SecretEnv + " or " + SecretFileEnv + ")")

// ReadSecret returns the cluster secret from file (when non-empty), else
// $LEMON_CLUSTER_SECRET_FILE, else $LEMON_CLUSTER_SECRET. It is never a
// flag value (argv is visible to every local user). Errors never carry
// the secret or the file's path.
func ReadSecret(file string) (string, error) {
	if file == "" {
		file = os.Getenv(SecretFileEnv)
	}
	s := os.Getenv(SecretEnv)
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", errors.New("cluster: cannot read the cluster secret file")
		}
		s = strings.TrimSpace(string(b))
	}
	if s == "" {
		return "", ErrNoSecret
	}
	return s, CheckSecret(s)
}

// CheckSecret bounds a secret: MinSecretBytes..MaxSecretBytes of
// printable ASCII without spaces, ':' , '@' or '/' (it travels in route
// URLs).
func CheckSecret(s string) error {
	if len(s) < MinSecretBytes || len(s) > MaxSecretBytes {
		return fmt.Errorf("cluster: the cluster secret must be %d to %d bytes", MinSecretBytes, MaxSecretBytes)
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b <= ' ' || b >= 0x7f || b == ':' || b == '@' || b == '/' || b == '%' {
			return errors.New("cluster: the cluster secret must be printable ASCII without spaces, ':', '@', '/' or '%'")
		}
	}
	return nil
}

// Options configures an embedded server.
type Options struct {
	// Name is this controller's unique name in the cluster (server_name).
	Name string
	// ClusterName is the NATS cluster name (default "lemon").
	ClusterName string
	// StateDir is the controller's state directory; JetStream stores
	// under StateDir/nats. Empty: a temporary directory the caller owns
	// is required, so StateDir must be set.
	StateDir string
	// Listen is the route listen address host:port (--cluster-listen).
	Listen string
	// Peers are the other controllers' route addresses, host:port or
	// nats-route://host:port (--cluster-peers).
	Peers []string
	// Secret authenticates routes and clients (ReadSecret).
	Secret string
	// RouteTLS, when set, secures routes (docs/CLUSTER.md, "TLS").
	RouteTLS *tls.Config
	// ClientListen is the NATS client address (default 127.0.0.1 on a
	// random port); the controller itself connects in-process.
	ClientListen string
}

// Embedded is a running embedded nats-server.
type Embedded struct {
	srv    *server.Server
	secret string
	// Replicas is the replica count for the controller's KV buckets:
	// min(3, 1+len(peers)).
	Replicas int
}

// Start runs an embedded nats-server and waits until it accepts
// connections (up to 10 s).
func Start(o Options) (*Embedded, error) {
	if o.Name == "" || o.StateDir == "" {
		return nil, errors.New("cluster: a server name and a state directory are required")
	}
	if err := CheckSecret(o.Secret); err != nil {
		return nil, err
	}
	if o.ClusterName == "" {
		o.ClusterName = "lemon"
	}
	host, port, err := splitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("cluster: --cluster-listen: %w", err)
	}
	opts := &server.Options{
		ServerName: o.Name,
		JetStream:  true,
		StoreDir:   filepath.Join(o.StateDir, "nats"),
		NoSigs:     true,
		NoLog:      true,
		Username:   routeUser,
		Password:   o.Secret,
		Cluster: server.ClusterOpts{
			Name: o.ClusterName, Host: host, Port: port,
			Username: routeUser, Password: o.Secret,
			TLSConfig: o.RouteTLS,
		},
	}
	if o.ClientListen != "" {
		h, p, err := splitHostPort(o.ClientListen)
		if err != nil {
			return nil, fmt.Errorf("cluster: client listen: %w", err)
		}
		opts.Host, opts.Port = h, p
	} else {
		// Routing starts only once the client listener is up, so there is
		// always one: loopback, a random port, the secret required.
		opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	}
	scheme := "nats-route"
	if len(o.Peers) == 0 {
		// A cluster of one: clustered JetStream needs routes to elect
		// its leaders, so without peers the server runs JetStream alone
		// and opens no route listener (restart with peers to grow it;
		// docs/CLUSTER.md).
		opts.Cluster = server.ClusterOpts{}
	}
	for _, p := range o.Peers {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "nats-route://"), "tls://")
		if _, _, err := splitHostPort(p); err != nil {
			return nil, fmt.Errorf("cluster: --cluster-peers: %w", err)
		}
		opts.Routes = append(opts.Routes, &url.URL{Scheme: scheme, User: url.UserPassword(routeUser, o.Secret), Host: p})
	}
	if err := os.MkdirAll(opts.StoreDir, 0o700); err != nil {
		return nil, errors.New("cluster: cannot create the JetStream store directory")
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("cluster: %s", scrub(err.Error(), o.Secret))
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("cluster: the embedded NATS server did not start")
	}
	return &Embedded{srv: srv, secret: o.Secret, Replicas: min(3, 1+len(o.Peers))}, nil
}

// Connect returns an in-process client connection to the server.
func (e *Embedded) Connect(name string) (*nats.Conn, error) {
	return nats.Connect("", nats.InProcessServer(e.srv), nats.UserInfo(routeUser, e.secret),
		nats.Name(name), nats.MaxReconnects(-1))
}

// ClusterSize reports the routes this server has open (tests, readiness).
func (e *Embedded) Routes() int { return e.srv.NumRoutes() }

// Shutdown stops the server and waits for it to end.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// ConnectExternal connects to an external NATS cluster at urls
// (comma-separated, --nats), authenticating with the cluster secret as
// the password of user "lemon" unless a URL carries its own user info.
func ConnectExternal(urls, secret, name string, tlsConf *tls.Config) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1)}
	if secret != "" {
		opts = append(opts, nats.UserInfo(routeUser, secret))
	}
	if tlsConf != nil {
		opts = append(opts, nats.Secure(tlsConf))
	}
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		return nil, errors.New("cluster: cannot connect to the NATS cluster")
	}
	return nc, nil
}

func splitHostPort(a string) (string, int, error) {
	h, p, err := net.SplitHostPort(a)
	if err != nil {
		return "", 0, errors.New("want host:port")
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, errors.New("bad port")
	}
	return h, n, nil
}

// scrub removes the secret from a message.
func scrub(msg, secret string) string {
	if secret == "" {
		return msg
	}
	return strings.ReplaceAll(msg, secret, "[redacted]")
}
