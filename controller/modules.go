package controller

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"

	"lemon/host/moduleset"
	"lemon/protocol"
)

// ModuleSet is the version-pinned module set the controller serves to
// nodes (docs/PROTOCOL.md, "Module set"): the manifest, its digest, and each module's bytes,
// verified against the manifest when built.
type ModuleSet struct {
	manifestJSON []byte
	digest       string
	bySHA        map[string][]byte
	manifest     moduleset.Manifest
	// methodsBySHA lists the methods each module declares, keyed by the
	// module's sha256, to answer module_refused for a node's refusals.
	methodsBySHA map[string][]string
	// methodCap is each declared method's capability.
	methodCap map[string]string
	// table routes the methods the set's modules declare.
	table methodTable
}

// NewModuleSet pins a manifest and the bytes of its modules (keyed by
// family), verifying every module's size and sha256. A manifest beyond
// moduleset.CheckBounds (64 modules, 64 MiB each, 256 MiB in all) is
// refused with an error wrapping moduleset.ErrSetBounds. So is a set whose
// method declarations do not route (see buildMethodTable: a bad
// declaration, a method claimed twice, one outside its module's
// namespace); the error names the module and the method.
func NewModuleSet(m moduleset.Manifest, bytesByFamily map[string][]byte) (*ModuleSet, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	// Nodes refuse a set beyond these bounds; refuse to pin one, so the
	// operator learns it at start rather than from every node's log.
	if err := m.CheckBounds(); err != nil {
		return nil, err
	}
	table, err := buildMethodTable(m)
	if err != nil {
		return nil, err
	}
	ms := &ModuleSet{digest: m.Digest(), bySHA: map[string][]byte{}, manifest: m, methodsBySHA: map[string][]string{},
		methodCap: map[string]string{}, table: table}
	for _, mod := range m.Modules {
		b, ok := bytesByFamily[mod.Family]
		if !ok {
			return nil, fmt.Errorf("module set: family %s has no bytes", mod.Family)
		}
		if err := mod.Verify(b); err != nil {
			return nil, err
		}
		ms.bySHA[mod.SHA256] = b
		for _, meth := range mod.Methods {
			ms.methodsBySHA[mod.SHA256] = append(ms.methodsBySHA[mod.SHA256], meth.Name)
			ms.methodCap[meth.Name] = meth.Capability
		}
	}
	mj, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	ms.manifestJSON = mj
	return ms, nil
}

// LoadModuleSet reads and verifies a module set from fsys (manifest.json
// plus module files, as build.sh writes them). The manifest's method
// declarations are decoded strictly first: a schema keyword outside the
// subset, an unknown declaration field or a repeated key is refused.
func LoadModuleSet(fsys fs.FS) (*ModuleSet, error) {
	raw, err := fs.ReadFile(fsys, moduleset.ManifestFile)
	if err != nil {
		return nil, fmt.Errorf("module set: %w", err)
	}
	if err := CheckManifestDeclarations(raw); err != nil {
		return nil, err
	}
	m, b, err := moduleset.Load(fsys)
	if err != nil {
		return nil, err
	}
	return NewModuleSet(m, b)
}

// LoadModuleSetDir is LoadModuleSet over a directory.
func LoadModuleSetDir(dir string) (*ModuleSet, error) { return LoadModuleSet(os.DirFS(dir)) }

// CheckManifestDeclarations decodes every method declaration of a
// manifest.json strictly (protocol.CheckStrictJSON, then unknown fields
// and schema keywords refused); the error names the module and method.
func CheckManifestDeclarations(raw []byte) error {
	if err := protocol.CheckStrictJSON(raw); err != nil {
		return fmt.Errorf("module set: manifest: %w", err)
	}
	var shape struct {
		Modules []struct {
			Family  string            `json:"family"`
			Methods []json.RawMessage `json:"methods"`
		} `json:"modules"`
	}
	if err := json.Unmarshal(raw, &shape); err != nil {
		return fmt.Errorf("module set: manifest: %w", err)
	}
	for _, mod := range shape.Modules {
		for i, rm := range mod.Methods {
			var ms moduleset.Method
			dec := json.NewDecoder(bytes.NewReader(rm))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&ms); err != nil {
				what := "method " + strconv.Itoa(i+1)
				var probe struct {
					Name string `json:"name"`
				}
				if json.Unmarshal(rm, &probe) == nil && protocol.ValidMethodName(probe.Name) {
					what = "method " + probe.Name
				}
				reason := "malformed declaration"
				if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
					k := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
					if !isPlainKey(k) {
						k = "?"
					}
					reason = "unknown field or schema keyword " + k
				}
				return fmt.Errorf("module set: module %s: %s: %s", safeFamily(mod.Family), what, reason)
			}
		}
	}
	return nil
}

func isPlainKey(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func safeFamily(f string) string {
	if isPlainKey(f) {
		return f
	}
	return "?"
}

// Digest is the set digest (moduleset.Manifest.Digest) sent in a node's hello-ok.
func (m *ModuleSet) Digest() string { return m.digest }

// Pinned describes the set for node.modules.status: digest, and each
// module's family, version, sha256, size and declared method names.
func (m *ModuleSet) Pinned() *protocol.PinnedSet {
	out := &protocol.PinnedSet{Digest: m.digest, Modules: make([]protocol.PinnedModule, 0, len(m.manifest.Modules))}
	for _, mod := range m.manifest.Modules {
		names := append([]string{}, m.methodsBySHA[mod.SHA256]...)
		sort.Strings(names)
		out.Modules = append(out.Modules, protocol.PinnedModule{Family: mod.Family, Version: mod.Version,
			SHA256: mod.SHA256, Size: mod.Size, Methods: names})
	}
	return out
}

// fetchOverhead is reserved in a fetch response for the frame envelope.
const fetchOverhead = 1024

// maxFetchChunk is the most decoded bytes whose base64 fits limit.
func maxFetchChunk(limit int) int64 {
	n := int64(limit-fetchOverhead) / 4 * 3
	if n < 3 {
		n = 3
	}
	return n
}

func (c *conn) handleModulesManifest(id string, params json.RawMessage) {
	var p protocol.ModulesManifestParams
	if e := protocol.DecodeParams(params, &p); e != nil {
		c.respondErr(id, e)
		return
	}
	ms := c.s.modules.Load()
	if ms == nil {
		c.respondErr(id, protocol.DomainError(protocol.CodeUnavailable, protocol.DomainModuleSetUnavailable,
			"this controller pins no module set"))
		return
	}
	c.respond(id, protocol.ModulesManifestResult{Digest: ms.digest, Manifest: ms.manifestJSON})
}

// handleModulesFetch answers one chunk of a pinned module. A chunk is
// never longer than what fits the smaller of the controller's and the
// node's maxPayload in base64; a node reads on until eof.
func (c *conn) handleModulesFetch(id string, params json.RawMessage) {
	var p protocol.ModulesFetchParams
	if e := protocol.DecodeParams(params, &p); e != nil {
		c.respondErr(id, e)
		return
	}
	if b, err := hex.DecodeString(p.SHA256); err != nil || len(b) != 32 || hex.EncodeToString(b) != p.SHA256 {
		c.respondErr(id, protocol.InvalidParams("sha256", "sha256 must be 64 lowercase hex digits"))
		return
	}
	ms := c.s.modules.Load()
	if ms == nil {
		c.respondErr(id, protocol.DomainError(protocol.CodeUnavailable, protocol.DomainModuleSetUnavailable,
			"this controller pins no module set"))
		return
	}
	data, ok := ms.bySHA[p.SHA256]
	if !ok {
		c.respondErr(id, protocol.DomainError(protocol.CodeNotFound, protocol.DomainModuleNotInSet,
			"no module of the pinned set has this sha256"))
		return
	}
	size := int64(len(data))
	if p.Offset < 0 || p.Offset > size {
		c.respondErr(id, protocol.InvalidParams("offset", "offset must be between 0 and the module size"))
		return
	}
	if p.Length < 0 {
		c.respondErr(id, protocol.InvalidParams("length", "length must not be negative"))
		return
	}
	n := maxFetchChunk(min(c.s.cfg.MaxPayload, c.peerMax))
	if p.Length > 0 && p.Length < n {
		n = p.Length
	}
	n = min(n, size-p.Offset)
	chunk := data[p.Offset : p.Offset+n]
	c.respond(id, protocol.ModulesFetchResult{
		SHA256:     p.SHA256,
		Offset:     p.Offset,
		Length:     n,
		Size:       size,
		EOF:        p.Offset+n >= size,
		DataBase64: base64.StdEncoding.EncodeToString(chunk),
	})
}

// SetModuleSet re-pins the controller to ms (already verified by
// NewModuleSet or LoadModuleSet) without a restart: new calls route by
// its declarations at once, nodes connecting from now on are told its
// digest in hello-ok, and every connected node is sent
// node.modules.changed so it fetches the set, finishes the calls it has in
// flight and reconnects serving it. Calls already routed are unaffected.
// ms nil is refused: a controller that pins a set keeps one.
func (s *Server) SetModuleSet(ms *ModuleSet) error {
	if ms == nil {
		return fmt.Errorf("module set: nil set")
	}
	old := s.modules.Swap(ms)
	if old != nil && old.digest == ms.digest && string(old.manifestJSON) == string(ms.manifestJSON) {
		return nil
	}
	s.log.Info("module set re-pinned", "digest", ms.digest)
	for _, c := range s.reg.liveConns() {
		go c.sendEvent(protocol.EventModulesChanged, protocol.ModuleSetRef{Digest: ms.digest})
	}
	return nil
}

// ModuleSet returns the pinned set (nil when none).
func (s *Server) ModuleSet() *ModuleSet { return s.modules.Load() }
