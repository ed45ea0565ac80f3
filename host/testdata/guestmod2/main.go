//go:build wasip1

// Command guestmod2 is a second family beside guestmod, to show that
// config.get hands each module its own settings only.
package main

import (
	"lemon/plugins/sdk"
	"lemon/plugins/sdk/config"
)

func main() {}

func init() {
	sdk.Serve(sdk.Manifest{
		Family: "guestmod2", Version: "0.0.1",
		Capabilities: []string{"hostinfo"},
		HostCalls:    config.HostCalls,
		Methods:      []sdk.MethodSpec{{Name: "guest2.config", Version: 1, Capability: "hostinfo"}},
	}, map[string]sdk.Handler{
		"guest2.config": func(req *sdk.Request) (*sdk.Result, error) {
			s, err := config.Get()
			if err != nil {
				return nil, err
			}
			return &sdk.Result{Payload: map[string]any{"settings": s}}, nil
		},
	})
}
