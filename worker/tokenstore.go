package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Token store (docs/PROTOCOL.md, "Pairing and durable node identity"): one
// file per durable node ID, ~/.lemon/nodes/execution/node-<sha256(nodeId)>.json,
// directory mode 0700, file mode 0600, written atomically. A record is
// bound to the exact controller URL it was paired with: a lookup with a
// different or missing controller returns no session or recovery
// material.

// RecordVersion is the format version of a NodeRecord file.
const RecordVersion = 1

// NodeRecord is one paired identity as stored on the node.
type NodeRecord struct {
	Version int    `json:"version"`
	NodeID  string `json:"nodeId"`
	// Name is the node's controller-side name as of the last pairing
	// (the connect.challenge result); an operator rename shows here
	// after the next re-pairing.
	Name string `json:"name"`
	// JoinName is the --name this identity was first joined with (trimmed).
	// It is kept across re-pairings and controller-side renames, so the
	// join command that created the identity keeps finding it. Records
	// written before it existed have none; their Name stands in.
	JoinName      string `json:"joinName,omitempty"`
	ControllerURL string `json:"controllerUrl"`
	// SessionToken is valid until SessionExpiresAtMs (Unix ms).
	SessionToken       string `json:"sessionToken,omitempty"`
	SessionExpiresAtMs int64  `json:"sessionExpiresAtMs,omitempty"`
	SessionGeneration  uint64 `json:"sessionGeneration,omitempty"`
	// RecoveryCredential re-pairs after expiry with the same ID and name.
	// A legacy record without it needs --pair --repair --node-id ID.
	RecoveryCredential string `json:"recoveryCredential,omitempty"`
	UpdatedAtMs        int64  `json:"updatedAtMs"`
}

// SessionValid reports whether the record holds a session token that has
// not expired at now.
func (r *NodeRecord) SessionValid(now time.Time) bool {
	return r.SessionToken != "" && now.UnixMilli() < r.SessionExpiresAtMs
}

// PendingPairing is an unfinished pairing, kept so a restarted join
// resumes the same pairing (and code) instead of starting another.
type PendingPairing struct {
	Version       int    `json:"version"`
	ControllerURL string `json:"controllerUrl"`
	Name          string `json:"name"`
	NodeID        string `json:"nodeId,omitempty"`
	Kind          string `json:"kind"`
	PairingID     string `json:"pairingId"`
	RequestSecret string `json:"requestSecret"`
	Code          string `json:"code"`
	ExpiresAtMs   int64  `json:"expiresAtMs"`
	// NextRecovery is the recovery credential this pairing's
	// connect.challenge sets, chosen and saved before the request is sent:
	// if its answer is lost, the node re-pairs NodeID with it.
	NextRecovery string `json:"nextRecovery,omitempty"`
}

// Errors of the token store. None of them carries record content.
var (
	ErrNoRecord           = errors.New("no stored node identity for this controller")
	ErrControllerMismatch = errors.New("the stored node identity belongs to a different controller URL")
	ErrRecordCorrupt      = errors.New("the stored node identity file is unreadable or malformed")
	ErrRecordWrongNode    = errors.New("the stored node identity file holds another node ID")
)

// TokenStore is a directory of NodeRecord files.
type TokenStore struct {
	Dir string
}

// DefaultTokenStore is $HOME/.lemon/nodes/execution.
func DefaultTokenStore() (TokenStore, error) {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return TokenStore{}, errors.New("token store: no home directory ($HOME)")
	}
	return TokenStore{Dir: filepath.Join(home, ".lemon", "nodes", "execution")}, nil
}

// RecordPath is the file of a durable node ID: node-<sha256 hex>.json.
func (s TokenStore) RecordPath(nodeID string) string {
	sum := sha256.Sum256([]byte(nodeID))
	return filepath.Join(s.Dir, "node-"+hex.EncodeToString(sum[:])+".json")
}

func (s TokenStore) pendingPath(controllerURL, name string) string {
	sum := sha256.Sum256([]byte(controllerURL + "\n" + strings.TrimSpace(name)))
	return filepath.Join(s.Dir, "pairing-"+hex.EncodeToString(sum[:])+".json")
}

// ensureDir creates the directory 0700 and tightens it if it exists
// looser.
func (s TokenStore) ensureDir() error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("token store: cannot create its directory")
	}
	fi, err := os.Stat(s.Dir)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("token store: its directory is unusable")
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(s.Dir, 0o700); err != nil {
			return fmt.Errorf("token store: cannot set its directory to mode 0700")
		}
	}
	return nil
}

// Save writes rec atomically (0600, fsync'd) under its node ID.
func (s TokenStore) Save(rec *NodeRecord) error {
	if rec.NodeID == "" || rec.ControllerURL == "" {
		return errors.New("token store: a record needs a node ID and a controller URL")
	}
	if err := s.ensureDir(); err != nil {
		return err
	}
	rec.Version = RecordVersion
	rec.UpdatedAtMs = time.Now().UnixMilli()
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(s.RecordPath(rec.NodeID), append(b, '\n'), 0o600); err != nil {
		return errors.New("token store: cannot write the record")
	}
	return nil
}

// Load returns the record of nodeID if it was stored for exactly
// controllerURL. A record for another controller returns
// ErrControllerMismatch and no material; a file that names another node
// ID (a swapped file) returns ErrRecordWrongNode.
func (s TokenStore) Load(nodeID, controllerURL string) (*NodeRecord, error) {
	if controllerURL == "" {
		return nil, ErrControllerMismatch
	}
	rec, err := readRecord(s.RecordPath(nodeID))
	if err != nil {
		return nil, err
	}
	if rec.NodeID != nodeID {
		return nil, ErrRecordWrongNode
	}
	if rec.ControllerURL != controllerURL {
		return nil, ErrControllerMismatch
	}
	return rec, nil
}

// FindByName returns the record stored for controllerURL that a join
// with --name name means: the node's current controller-side name (Name)
// or the name the identity was first joined with (JoinName), compared
// trimmed and case-insensitively, as the controller compares names. A
// Name match wins over a JoinName match (after a rename freed the old name
// another local identity may hold it now); among equals the most recently
// saved record wins. Only records of that exact controller are
// considered, and a file not named after its node ID is ignored.
func (s TokenStore) FindByName(name, controllerURL string) (*NodeRecord, error) {
	name = strings.TrimSpace(name)
	if name == "" || controllerURL == "" {
		return nil, ErrNoRecord
	}
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoRecord
	}
	if err != nil {
		return nil, errors.New("token store: cannot read its directory")
	}
	var found *NodeRecord
	foundRank := 0
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, "node-") || !strings.HasSuffix(n, ".json") {
			continue
		}
		rec, err := readRecord(filepath.Join(s.Dir, n))
		if err != nil || rec.ControllerURL != controllerURL {
			continue
		}
		rank := rec.nameRank(name)
		if rank == 0 {
			continue
		}
		if filepath.Base(s.RecordPath(rec.NodeID)) != n {
			continue // a file renamed or copied from another identity
		}
		if found == nil || rank > foundRank || (rank == foundRank && rec.UpdatedAtMs > found.UpdatedAtMs) {
			found, foundRank = rec, rank
		}
	}
	if found == nil {
		return nil, ErrNoRecord
	}
	return found, nil
}

// nameRank is how well name (trimmed) names r: 2 its controller-side
// name, 1 the name it was joined with, 0 neither.
func (r *NodeRecord) nameRank(name string) int {
	switch {
	case strings.EqualFold(strings.TrimSpace(r.Name), name):
		return 2
	case r.JoinName != "" && strings.EqualFold(strings.TrimSpace(r.JoinName), name):
		return 1
	}
	return 0
}

// LocalName is the name the node's local state is kept under: the name
// it was first joined with, or for an older record its stored name. It
// does not change when an operator renames the node.
func (r *NodeRecord) LocalName() string {
	if r.JoinName != "" {
		return r.JoinName
	}
	return r.Name
}

func readRecord(path string) (*NodeRecord, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoRecord
	}
	if err != nil || len(b) > 64<<10 {
		return nil, ErrRecordCorrupt
	}
	var rec NodeRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.NodeID == "" || rec.Version != RecordVersion {
		return nil, ErrRecordCorrupt
	}
	return &rec, nil
}

// SavePending stores an unfinished pairing (0600, atomic).
func (s TokenStore) SavePending(p *PendingPairing) error {
	if err := s.ensureDir(); err != nil {
		return err
	}
	p.Version = RecordVersion
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(s.pendingPath(p.ControllerURL, p.Name), b, 0o600); err != nil {
		return errors.New("token store: cannot write the pending pairing")
	}
	return nil
}

// LoadPending returns an unexpired pending pairing for the controller and
// name, or nil.
func (s TokenStore) LoadPending(controllerURL, name string, now time.Time) *PendingPairing {
	b, err := os.ReadFile(s.pendingPath(controllerURL, name))
	if err != nil {
		return nil
	}
	var p PendingPairing
	if json.Unmarshal(b, &p) != nil || p.ControllerURL != controllerURL || p.PairingID == "" ||
		p.ExpiresAtMs <= now.UnixMilli() {
		return nil
	}
	return &p
}

// DeletePending removes the pending pairing of a controller and name.
func (s TokenStore) DeletePending(controllerURL, name string) {
	os.Remove(s.pendingPath(controllerURL, name))
}
