package protocol

import "encoding/json"

// Controller methods and events of the node registry, routing and module-set
// serving (docs/PROTOCOL.md). Node methods themselves (node.host.info,
// node.fs.*, ...) are registered by their families through RegisterMethod.
const (
	// MethodConnect is the handshake request; it must be a connection's first request.
	MethodConnect = "connect"
	// MethodNodeList lists every known node with its online status (scope operator.read).
	MethodNodeList = "node.list"
	// MethodNodeDescribe describes one node (scope operator.read).
	MethodNodeDescribe = "node.describe"
	// MethodNodeInvoke routes any registered node method that allows it
	// (scope operator.admin, plus the inner method's scope).
	MethodNodeInvoke = "node.invoke"
	// MethodModulesManifest is asked by a node: the controller's pinned module-set manifest.
	MethodModulesManifest = "node.modules.manifest"
	// MethodModulesFetch is asked by a node: bytes of one module of the pinned set, by sha256.
	MethodModulesFetch = "node.modules.fetch"
)

// Domain codes (error.details.code) used by the controller's routing.
const (
	// DomainNodeMethodUnavailable: the node is online but did not advertise the
	// method at the version the controller requires. Nothing was dispatched.
	DomainNodeMethodUnavailable = "node_method_unavailable"
	// DomainNodeDisconnected: the node's connection closed or was replaced
	// while a call was in flight.
	DomainNodeDisconnected = "node_disconnected"
	// DomainGenericInvokeRefused: the method may not be called through node.invoke.
	DomainGenericInvokeRefused = "generic_invoke_refused"
	// DomainModuleNotInSet: node.modules.fetch named a digest outside the pinned set.
	DomainModuleNotInSet = "module_not_in_set"
	// DomainModuleSetUnavailable: the controller has no pinned module set.
	DomainModuleSetUnavailable = "module_set_unavailable"
	// DomainJSONLimits: a frame nests deeper than MaxJSONDepth or holds more
	// than MaxJSONItems values.
	DomainJSONLimits = "json_limits_exceeded"
	// DomainBinaryFrame: a binary WebSocket frame was sent; only text frames are accepted.
	DomainBinaryFrame = "binary_frame"
	// DomainTooManyInflight: the connection already has the most requests in flight.
	DomainTooManyInflight = "too_many_inflight"
	// DomainAuthRateLimited: connect was refused unread because the peer's
	// address has failed authentication too often; retry later.
	DomainAuthRateLimited = "auth_rate_limited"
)

// Node identity kinds reported by node.list / node.describe.
const (
	// NodeIdentityToken: the node authenticates with an interim node token
	// listed in the controller policy (an explicit operator choice).
	NodeIdentityToken = "token"
	// NodeIdentityPaired: the node was enrolled through node.pair.* and
	// authenticates with a session token from connect.challenge.
	NodeIdentityPaired = "paired"
)

// NodeListParams are the params of node.list (docs/PROTOCOL.md, "Node
// registry"). All are optional. With Limit or Cursor the list is paged:
// nodes in nodeId order, at most Limit (1..MaxNodeListLimit) per page,
// starting after the nodeId Cursor; NextCursor of the result continues.
// Without either, the nodes come sorted by name, at most
// MaxNodeListLimit of them (Truncated says more exist). NamePrefix
// (1..128 bytes) keeps names that start with it, compared
// case-insensitively; Online keeps nodes whose online state equals it.
type NodeListParams struct {
	Cursor     string `json:"cursor,omitempty"`
	Limit      int    `json:"limit,omitempty"`
	NamePrefix string `json:"namePrefix,omitempty"`
	Online     *bool  `json:"online,omitempty"`
}

// MaxNodeListLimit is the largest node.list page, and the most nodes an
// unpaged node.list returns. A page is also cut where it would no longer
// fit the connection's maxPayload (NextCursor continues).
const MaxNodeListLimit = 1000

// Paged reports whether the request asks for a page (Limit or Cursor).
func (p NodeListParams) Paged() bool { return p.Limit != 0 || p.Cursor != "" }

// ValidateNodeList checks node.list params strictly: limit 1..1000,
// cursor a node id (1..256 bytes of UTF-8), namePrefix 1..128 bytes
// without control characters.
func ValidateNodeList(params json.RawMessage) (NodeListParams, *Error) {
	var p NodeListParams
	if e := DecodeParams(params, &p); e != nil {
		return p, e
	}
	if p.Limit < 0 || p.Limit > MaxNodeListLimit {
		return p, InvalidParams("limit", "limit must be 1 to 1000")
	}
	if p.Cursor != "" {
		if e := RequireNodeID(p.Cursor); e != nil {
			return p, InvalidParams("cursor", "cursor is malformed")
		}
	}
	if p.NamePrefix != "" {
		if _, e := NormalizeNodeName("namePrefix", p.NamePrefix); e != nil || len(p.NamePrefix) > 128 {
			return p, InvalidParams("namePrefix", "namePrefix must be 1 to 128 bytes without control characters")
		}
	}
	return p, nil
}

// NodeSummary is one entry of node.list. Times are Unix ms; a zero time is omitted.
type NodeSummary struct {
	NodeID string `json:"nodeId"`
	Name   string `json:"name"`
	// Online is true only while an authenticated live connection serves the node.
	Online bool `json:"online"`
	// Identity is NodeIdentityToken or NodeIdentityPaired.
	Identity      string `json:"identity"`
	ConnectedAtMs int64  `json:"connectedAtMs,omitempty"`
	LastSeenAtMs  int64  `json:"lastSeenAtMs,omitempty"`
}

// NodeListResult is the payload of node.list: nodes sorted by name
// (unpaged) or by nodeId (paged). NextCursor, on a page, is the cursor of
// the next page; absent on the last. Truncated, unpaged, says that more
// nodes match than MaxNodeListLimit (or than fit one frame): page to see
// them all.
type NodeListResult struct {
	Nodes      []NodeSummary `json:"nodes"`
	NextCursor string        `json:"nextCursor,omitempty"`
	Truncated  bool          `json:"truncated,omitempty"`
}

// NodeDescribeParams are the params of node.describe.
type NodeDescribeParams struct {
	NodeID string `json:"nodeId"`
}

// NodeDescription is the payload of node.describe. Methods, ModuleSetDigest,
// MaxPayload, Capabilities and Client are those of the live (or last) connection.
type NodeDescription struct {
	NodeSummary
	// Methods maps method name to the version the node serves.
	Methods         map[string]int `json:"methods"`
	ModuleSetDigest string         `json:"moduleSetDigest,omitempty"`
	// MaxPayload is the largest frame in bytes the node accepts (and the cap of its results).
	MaxPayload   int            `json:"maxPayload,omitempty"`
	Capabilities []string       `json:"capabilities,omitempty"`
	Client       *ConnectClient `json:"client,omitempty"`
	// Modules is the status of each module of the node's set, as the node
	// reported it (loaded, or refused with a bounded reason).
	Modules []ModuleStatus `json:"modules,omitempty"`
}

// NodeInvokeParams are the params of the generic node.invoke: Args are the
// params of Method (nodeId is added when absent and must match when present).
type NodeInvokeParams struct {
	NodeID string          `json:"nodeId"`
	Method string          `json:"method"`
	Args   json.RawMessage `json:"args,omitempty"`
}

// NodeInvokeResultAck is the controller's payload answering a node's
// node.invoke.result request.
type NodeInvokeResultAck struct {
	Accepted bool `json:"accepted"`
}

// ModuleSetRef names the controller's pinned module set: Digest is the
// set digest (host/moduleset Manifest.Digest: 64 hex digits).
type ModuleSetRef struct {
	Digest string `json:"digest"`
}

// NodeHelloOK is the hello-ok frame a node receives: the common hello-ok
// plus the pinned module set (absent when the controller pins none).
type NodeHelloOK struct {
	HelloOK
	ModuleSet *ModuleSetRef `json:"moduleSet,omitempty"`
}

// EventModulesChanged is sent to every connected node when the controller
// re-pins its module set; its payload is a ModuleSetRef with the new
// digest. A node fetches and installs the set, finishes the calls it has
// in flight, and reconnects advertising the new set's methods.
const EventModulesChanged = "node.modules.changed"

// ModulesManifestParams are the params of node.modules.manifest: none.
type ModulesManifestParams struct{}

// ModulesManifestResult is the payload of node.modules.manifest: the
// manifest JSON exactly as pinned, and its digest.
type ModulesManifestResult struct {
	Digest   string          `json:"digest"`
	Manifest json.RawMessage `json:"manifest"`
}

// ModulesFetchParams are the params of node.modules.fetch. SHA256 is 64
// lowercase hex digits; Offset and Length are in decoded bytes; Length 0
// means "as much as fits the payload cap".
type ModulesFetchParams struct {
	SHA256 string `json:"sha256"`
	Offset int64  `json:"offset,omitempty"`
	Length int64  `json:"length,omitempty"`
}

// ModulesFetchResult is the payload of node.modules.fetch: one chunk of
// the module. Length is the decoded byte count of DataBase64, Size the
// module's size, EOF true when the chunk reaches the end.
type ModulesFetchResult struct {
	SHA256     string `json:"sha256"`
	Offset     int64  `json:"offset"`
	Length     int64  `json:"length"`
	Size       int64  `json:"size"`
	EOF        bool   `json:"eof"`
	DataBase64 string `json:"dataBase64"`
}

// pureReads are the node methods that never change node state; a timeout or
// a disconnect on one of them is reported retrySafe:true,
// mutationMayHaveApplied:false. Every other method (including unknown
// ones) is treated as a possible mutation.
var pureReads = map[string]bool{
	"node.host.info":       true,
	"node.fs.list":         true,
	"node.fs.stat":         true,
	"node.fs.read":         true,
	"node.process.get":     true,
	"node.secrets.list":    true,
	"node.secrets.receipt": true,
}

// PureRead reports whether method is a node method that never mutates
// state (see pureReads). Conservative: false for anything not listed.
func PureRead(method string) bool { return pureReads[method] }
