// Package config reads the module's own settings: its [modules.<family>]
// table of the node's worker policy, through the config.get host call
// (docs/POLICY.md, "Module settings"). A module sees only its own
// family's table; an empty map when the policy gives none.
//
// A module that uses it lists config.get in its manifest (HostCalls).
package config

import (
	"encoding/json"

	"lemon/hostcalls/contract"

	"lemon/hostcalls/guestcall"
	"lemon/plugins/sdk"
)

// HostCalls are the imports this package makes, for sdk.Manifest.HostCalls.
var HostCalls = []string{guestcall.ConfigGet}

// Get returns the settings table: strings, float64 numbers (integers
// too, as JSON numbers), booleans and []any arrays of them.
func Get() (map[string]any, error) {
	s, err := sdk.InvokeJSON(configGet, contract.ConfigGetCall, contract.Empty{})
	if err != nil {
		return nil, err
	}
	if s.Settings == nil {
		s.Settings = map[string]any{}
	}
	return s.Settings, nil
}

// Decode decodes the settings table into v (a struct with json tags).
func Decode(v any) error {
	var s struct {
		Settings json.RawMessage `json:"settings"`
	}
	if err := sdk.CallJSON(configGet, nil, &s); err != nil {
		return err
	}
	return json.Unmarshal(s.Settings, v)
}
