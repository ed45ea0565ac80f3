package protocol

import "encoding/json"

// HostInfoParams are the params of node.host.info (spec "Host information").
type HostInfoParams struct {
	NodeID string `json:"nodeId"`
}

// ValidateHostInfo checks node.host.info params strictly.
func ValidateHostInfo(params json.RawMessage) *Error {
	var p HostInfoParams
	if err := DecodeParams(params, &p); err != nil {
		return err
	}
	return RequireNodeID(p.NodeID)
}

func init() {
	RegisterMethod(MethodSpec{Name: "node.host.info", Version: 1, Validate: ValidateHostInfo})
}
