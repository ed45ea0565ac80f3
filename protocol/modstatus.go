package protocol

// node.modules.status: the operator's view of the pinned module set and
// of what each node runs (docs/PROTOCOL.md, "Module status").

// MethodModulesStatus is asked by an operator (scope operator.read): the
// controller's pinned set and, per node, the set digest it runs and every
// module it refused. The controller answers it from its registry; no node
// is asked.
const MethodModulesStatus = "node.modules.status"

// ModulesStatusParams are the params of node.modules.status: none.
type ModulesStatusParams struct{}

// PinnedModule is one module of the controller's pinned set. Methods are
// the method names it declares, sorted.
type PinnedModule struct {
	Family  string   `json:"family"`
	Version string   `json:"version"`
	SHA256  string   `json:"sha256"`
	Size    int64    `json:"size"`
	Methods []string `json:"methods"`
}

// PinnedSet is the controller's pinned module set: its digest and
// modules in manifest order.
type PinnedSet struct {
	Digest  string         `json:"digest"`
	Modules []PinnedModule `json:"modules"`
}

// NodeModules is one node's module state as it last reported it in
// connect: the set digest it runs, whether that is the pinned one, and
// the modules it refused (Refused holds only State "refused" entries).
type NodeModules struct {
	NodeID          string         `json:"nodeId"`
	Name            string         `json:"name"`
	Online          bool           `json:"online"`
	ModuleSetDigest string         `json:"moduleSetDigest,omitempty"`
	Current         bool           `json:"current"`
	Refused         []ModuleStatus `json:"refused"`
}

// ModulesStatusResult is the payload of node.modules.status. Pinned is
// null when the controller pins no set. Nodes are sorted by name; when
// they do not all fit the connection's maxPayload the list is cut and
// Truncated is true.
type ModulesStatusResult struct {
	Pinned    *PinnedSet    `json:"pinned"`
	Nodes     []NodeModules `json:"nodes"`
	Truncated bool          `json:"truncated,omitempty"`
}
