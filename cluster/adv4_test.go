package cluster

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestAdv4ClientNeedsSecret: a NATS client that reaches the embedded
// server's client port without the cluster secret (no credentials, the
// wrong password, the right password under another user) cannot connect,
// so it can neither publish on lemon.node.* nor touch the KV buckets; the
// secret's holder can.
func TestAdv4ClientNeedsSecret(t *testing.T) {
	const secret = "adv4-secret-0123456789abcdef"
	client := freeAddr(t)
	e, err := Start(Options{Name: "adv4", StateDir: t.TempDir(), Listen: freeAddr(t), ClientListen: client, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	for name, opts := range map[string][]nats.Option{
		"no credentials": nil,
		"wrong password": {nats.UserInfo(routeUser, "wrong-secret-0123456789abcdef")},
		"other user":     {nats.UserInfo("admin", secret)},
		"token":          {nats.Token(secret)},
	} {
		opts = append(opts, nats.Timeout(2*time.Second), nats.NoReconnect())
		nc, err := nats.Connect("nats://"+client, opts...)
		if err == nil {
			perr := nc.Publish("lemon.node.x.req", []byte("{}"))
			nc.Close()
			t.Errorf("%s: connected (publish: %v), want an authorization error", name, perr)
		}
	}
	nc, err := nats.Connect("nats://"+client, nats.UserInfo(routeUser, secret), nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatalf("with the secret: %v", err)
	}
	nc.Close()
}
