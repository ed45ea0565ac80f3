package protocol

import (
	"encoding/json"
	"sync/atomic"
)

// Frame types (docs/PROTOCOL.md). Every WebSocket text frame is one JSON object.
const (
	FrameReq     = "req"
	FrameRes     = "res"
	FrameEvent   = "event"
	FrameHelloOK = "hello-ok"
)

// ProtocolVersion is the version reported in hello-ok.
const ProtocolVersion = 1

// UnknownID is the id used when answering a frame whose id could not be read.
const UnknownID = "unknown"

// Request is {"type":"req","id":"r1","method":"node.fs.read","params":{...}}.
type Request struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
	// ExecutionContext, on an operator's req, narrows the context the
	// controller builds for the request (docs/POLICY.md, "Narrowing a
	// request's context"); it can never widen it.
	ExecutionContext json.RawMessage `json:"executionContext,omitempty"`
}

// Response is {"type":"res","id":"r1","ok":true,"payload":{...}} or the
// same with ok:false and error.
type Response struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	OK      bool            `json:"ok"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Event is {"type":"event","event":"node.invoke.request","seq":7,"payload":{...}};
// seq counts per connection from 1.
type Event struct {
	Type    string          `json:"type"`
	Event   string          `json:"event"`
	Seq     uint64          `json:"seq"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Envelope reads just enough of a frame to route it.
type Envelope struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Method string `json:"method"`
	Event  string `json:"event"`
}

// OKResponse builds a successful response frame.
func OKResponse(id string, payload json.RawMessage) Response {
	return Response{Type: FrameRes, ID: id, OK: true, Payload: payload}
}

// ErrResponse builds a failed response frame.
func ErrResponse(id string, err *Error) Response {
	return Response{Type: FrameRes, ID: id, OK: false, Error: err}
}

// Roles of a connection.
const (
	RoleOperator = "operator"
	RoleNode     = "node"
)

// ConnectParams are the params of the first request, method "connect".
type ConnectParams struct {
	Role   string         `json:"role"`
	Auth   ConnectAuth    `json:"auth"`
	Scopes []string       `json:"scopes,omitempty"`
	Client ConnectClient  `json:"client"`
	Node   *NodeAdvertise `json:"node,omitempty"`
}

// ConnectAuth carries the bearer token. It is never logged or echoed.
type ConnectAuth struct {
	Token string `json:"token"`
}

// ConnectClient identifies the connecting program.
type ConnectClient struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

// NodeAdvertise is what a node declares when it connects: its name, the
// methods and versions it serves, and the digest of its module set.
type NodeAdvertise struct {
	Name            string         `json:"name,omitempty"`
	NodeID          string         `json:"nodeId,omitempty"`
	Methods         map[string]int `json:"methods"`
	ModuleSetDigest string         `json:"moduleSetDigest,omitempty"`
	MaxPayload      int            `json:"maxPayload,omitempty"`
	Capabilities    []string       `json:"capabilities,omitempty"`
	// Modules is the status of each module of the node's set, in manifest
	// order: at most MaxAdvertisedModules entries, each Reason at most
	// MaxModuleReasonBytes of printable ASCII (docs/PROTOCOL.md, "Module set").
	Modules []ModuleStatus `json:"modules,omitempty"`
}

// Bounds on NodeAdvertise.Modules.
const (
	MaxAdvertisedModules = 64
	MaxModuleReasonBytes = 256
)

// HelloOK answers a successful connect.
type HelloOK struct {
	Type     string        `json:"type"`
	Protocol int           `json:"protocol"`
	Server   HelloServer   `json:"server"`
	Features HelloFeatures `json:"features"`
	Policy   HelloPolicy   `json:"policy"`
	Auth     HelloAuth     `json:"auth"`
}

type HelloServer struct {
	Version string `json:"version"`
	ConnID  string `json:"connId"`
}

type HelloFeatures struct {
	Methods []string `json:"methods"`
	Events  []string `json:"events"`
}

// HelloPolicy gives the limits the peer must respect: maxPayload in bytes
// of one frame, maxBufferedBytes of queued outbound data, tickIntervalMs.
type HelloPolicy struct {
	MaxPayload       int `json:"maxPayload"`
	MaxBufferedBytes int `json:"maxBufferedBytes"`
	TickIntervalMs   int `json:"tickIntervalMs"`
}

type HelloAuth struct {
	Role     string   `json:"role"`
	Scopes   []string `json:"scopes"`
	ClientID string   `json:"clientId"`
	NodeID   string   `json:"nodeId,omitempty"`
}

// Controller-to-node events and node-to-controller requests.
const (
	EventInvokeRequest = "node.invoke.request"
	EventInvokeCancel  = "node.invoke.cancel"
	MethodInvokeResult = "node.invoke.result"
)

// InvokeRequest is the payload of event node.invoke.request.
// TimeoutMs is the broker deadline in ms; SessionGeneration is the node
// session generation the controller pinned.
type InvokeRequest struct {
	InvokeID          string          `json:"invokeId"`
	NodeID            string          `json:"nodeId"`
	Method            string          `json:"method"`
	Args              json.RawMessage `json:"args"`
	TimeoutMs         int64           `json:"timeoutMs"`
	SessionGeneration uint64          `json:"sessionGeneration,omitempty"`
	ExecutionContext  json.RawMessage `json:"executionContext,omitempty"`

	// The fields below are never on the wire: the node's session sets them
	// for its dispatcher.

	// MaxResultBytes is the largest success payload, in bytes of JSON, the
	// session's connection can deliver for this invocation (the negotiated
	// maxPayload less the node.invoke.result frame around the payload);
	// 0 means unknown. Budgets of base64 output derive from it.
	MaxResultBytes int `json:"-"`
	// Outcome, when set, is marked by the dispatcher once the invocation
	// has had an effect on node state, so an error the session sends after
	// that says mutationMayHaveApplied:true.
	Outcome *InvokeOutcome `json:"-"`
}

// InvokeOutcome records whether an invocation has had an effect on node
// state: a host call declared as an effect has succeeded. It is safe for
// concurrent use; a nil *InvokeOutcome records nothing and reports false.
type InvokeOutcome struct{ applied atomic.Bool }

// MarkApplied records that an effect has happened.
func (o *InvokeOutcome) MarkApplied() {
	if o != nil {
		o.applied.Store(true)
	}
}

// Applied reports whether MarkApplied was called.
func (o *InvokeOutcome) Applied() bool { return o != nil && o.applied.Load() }

// InvokeCancel is the payload of event node.invoke.cancel.
type InvokeCancel struct {
	InvokeID string `json:"invokeId"`
}

// InvokeResult is the params of the node's request node.invoke.result:
// exactly one of Result and Error is set.
type InvokeResult struct {
	InvokeID string          `json:"invokeId"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    *Error          `json:"error,omitempty"`
}
