package controller

import (
	"encoding/json"

	"lemon/protocol"
)

// sessionRecord is a node session, stored under the hex sha256 of its token.
type sessionRecord struct {
	NodeID      string `json:"nodeId"`
	Generation  uint64 `json:"generation"`
	IssuedAtMs  int64  `json:"issuedAtMs"`
	ExpiresAtMs int64  `json:"expiresAtMs"`
}

// pairingRecord is a pairing request.
type pairingRecord struct {
	ID string `json:"id"`
}

func (r *registry) loadPairingState() error { return nil }

func (r *registry) expire() {}

func (c *conn) handlePairing(id, method string, params json.RawMessage) {
	c.respondErr(id, protocol.Errorf(protocol.CodeNotImplemented, "pairing is not available yet"))
}
