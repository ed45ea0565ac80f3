package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"lemon/cluster"
	"lemon/controller"
)

// clusterFlags are `lemon controller`'s cluster flags (docs/CLUSTER.md).
type clusterFlags struct {
	listen, peers, name, natsURL, secretFile *string
}

func addClusterFlags(fs *flag.FlagSet) *clusterFlags {
	return &clusterFlags{
		listen:     fs.String("cluster-listen", "", "run an embedded NATS server routing to peers on ADDR (host:port); enables cluster mode"),
		peers:      fs.String("cluster-peers", "", "comma-separated route addresses (host:port) of the other controllers' --cluster-listen"),
		name:       fs.String("cluster-name", "", "this controller's unique name in the cluster (default: hostname-port of --cluster-listen)"),
		natsURL:    fs.String("nats", "", "use an external NATS cluster (comma-separated nats:// URLs) instead of the embedded server"),
		secretFile: fs.String("cluster-secret-file", "", "file holding the cluster secret (default $LEMON_CLUSTER_SECRET_FILE, else $LEMON_CLUSTER_SECRET)"),
	}
}

// setup starts the cluster engine when cluster flags are given and fills
// cfg.Cluster; stop ends it after the controller closed. stateDir is the
// controller's state directory (required for the embedded JetStream store).
func (cf *clusterFlags) setup(cfg *controller.Config, stateDir string) (stop func(), err error) {
	if *cf.listen == "" && *cf.natsURL == "" {
		if *cf.peers != "" {
			return nil, errors.New("--cluster-peers needs --cluster-listen")
		}
		return func() {}, nil
	}
	if *cf.listen != "" && *cf.natsURL != "" {
		return nil, errors.New("--cluster-listen and --nats exclude each other")
	}
	secret, err := cluster.ReadSecret(*cf.secretFile)
	if err != nil {
		return nil, err
	}
	name := *cf.name
	if name == "" {
		h, _ := os.Hostname()
		name = strings.NewReplacer(":", "-", ".", "-").Replace(h + "-" + *cf.listen)
	}
	if *cf.natsURL != "" {
		nc, err := cluster.ConnectExternal(*cf.natsURL, secret, name, nil)
		if err != nil {
			return nil, err
		}
		cfg.Cluster = &controller.ClusterConfig{Conn: nc, Name: name, Replicas: 3}
		return nc.Close, nil
	}
	if stateDir == "" {
		return nil, errors.New("cluster mode keeps its JetStream store in the state directory: --memory is not allowed")
	}
	var peers []string
	for _, p := range strings.Split(*cf.peers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			peers = append(peers, p)
		}
	}
	emb, err := cluster.Start(cluster.Options{Name: name, StateDir: stateDir, Listen: *cf.listen, Peers: peers, Secret: secret})
	if err != nil {
		return nil, err
	}
	nc, err := emb.Connect(name)
	if err != nil {
		emb.Shutdown()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	cfg.Cluster = &controller.ClusterConfig{Conn: nc, Name: name, Replicas: emb.Replicas}
	return func() { nc.Close(); emb.Shutdown() }, nil
}
