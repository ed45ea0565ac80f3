package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Ready returns the node's failing readiness checks: "controller" while
// no session with the controller is up, "module_set" while no module set
// is loaded. Empty means ready (docs/OPERATIONS.md, "Health").
func (w *Worker) Ready() []string {
	var bad []string
	if !w.online.Load() {
		bad = append(bad, "controller")
	}
	if w.cfg.LoadModules != nil {
		if disp, _ := w.current(); disp == nil {
			bad = append(bad, "module_set")
		}
	}
	return bad
}

// NewMetricsRegistry returns a registry with the Go runtime and process
// collectors, for HostOptions.Registry and ServeMetrics.
func NewMetricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// MetricsHandler serves /metrics (Prometheus text format from g),
// /healthz (200 "ok") and /readyz (200 "ready", or 503 "not ready:
// CHECK,..." from ready; nil ready is always ready).
func MetricsHandler(g prometheus.Gatherer, ready func() []string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Cache-Control", "no-store")
		if ready != nil {
			if bad := ready(); len(bad) > 0 {
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, "not ready: "+strings.Join(bad, ",")+"\n")
				return
			}
		}
		io.WriteString(w, "ready\n")
	})
	return mux
}

// ServeMetrics serves MetricsHandler on ln (the node's --metrics-listen)
// until ctx ends; it returns nil then.
func ServeMetrics(ctx context.Context, ln net.Listener, g prometheus.Gatherer, ready func() []string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hs := &http.Server{Handler: MetricsHandler(g, ready),
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second,
		IdleTimeout: 30 * time.Second, MaxHeaderBytes: 16 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && ctx.Err() == nil {
		return err
	}
	return nil
}

// nodeCollector reports the gauges of the node's current host and
// families at scrape time.
type nodeCollector struct {
	n         *NodeHost
	instances *prometheus.Desc
	processes *prometheus.Desc
}

func newNodeCollector(n *NodeHost) *nodeCollector {
	return &nodeCollector{n: n,
		instances: prometheus.NewDesc("lemon_node_pool_instances",
			"Live module instances by module (pool).", []string{"module"}, nil),
		processes: prometheus.NewDesc("lemon_node_processes_active",
			"Process runs in progress.", nil, nil),
	}
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.instances
	ch <- c.processes
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	if h := c.n.cur.Load(); h != nil {
		for fam, n := range h.PoolInstances() {
			ch <- prometheus.MustNewConstMetric(c.instances, prometheus.GaugeValue, float64(n), fam)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.processes, prometheus.GaugeValue, float64(c.n.fams.ActiveProcesses()))
}
