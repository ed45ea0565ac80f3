package worker

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"lemon/protocol"
)

type nopDispatcher struct{}

func (nopDispatcher) Methods() map[string]int { return map[string]int{} }
func (nopDispatcher) Invoke(context.Context, protocol.InvokeRequest) (json.RawMessage, *protocol.Error) {
	return nil, nil
}

func getBody(t *testing.T, url string, want int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d %q, want %d", url, resp.StatusCode, b, want)
	}
	return string(b)
}

// TestNodeHealthEndpoints: /healthz is 200; /readyz is 503 naming the
// controller while no session is up (and module_set while no set is
// loaded), 200 once both hold; /metrics serves the registry.
func TestNodeHealthEndpoints(t *testing.T) {
	w, err := New(Config{ControllerURL: "ws://127.0.0.1:1/ws", Token: "t", AllowInsecureController: true,
		LoadModules: func(context.Context, *ModuleSet) (Dispatcher, error) { return nopDispatcher{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(MetricsHandler(NewMetricsRegistry(), w.Ready))
	defer srv.Close()
	if got := getBody(t, srv.URL+"/healthz", 200); got != "ok\n" {
		t.Fatalf("healthz %q", got)
	}
	if got := getBody(t, srv.URL+"/readyz", 503); got != "not ready: controller,module_set\n" {
		t.Fatalf("readyz %q", got)
	}
	w.mu.Lock()
	w.disp = nopDispatcher{}
	w.mu.Unlock()
	w.online.Store(true)
	if got := getBody(t, srv.URL+"/readyz", 200); got != "ready\n" {
		t.Fatalf("readyz %q", got)
	}
	if got := getBody(t, srv.URL+"/metrics", 200); !strings.Contains(got, "go_goroutines") {
		t.Fatalf("metrics lack the Go collector")
	}
}
