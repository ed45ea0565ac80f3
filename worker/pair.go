package worker

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"lemon/client"
	"lemon/protocol"
	"lemon/version"
)

// PairConfig configures Pair (docs/PROTOCOL.md, "Pairing and durable node
// identity"; protocol/pairing.go has the message flow).
type PairConfig struct {
	ControllerURL           string
	AllowInsecureController bool
	// OperatorToken authorises pairing only (LEMON_NODE_OPERATOR_TOKEN);
	// it is never stored, logged or echoed.
	OperatorToken string
	// Name and Methods describe a new node.
	Name    string
	Methods map[string]int
	Store   TokenStore
	// Existing, when it holds a recovery credential, re-pairs that node:
	// same node ID and controller-side name, every older session revoked.
	// The credential rotates: the new one replaces it in Store (one
	// atomic write) and the old one stops working.
	Existing *NodeRecord
	// Repair re-pairs NodeID without a recovery credential (legacy
	// records); an approver approves it and it issues a credential. The
	// controller refuses it for a node that has a credential.
	Repair bool
	NodeID string
	// OnCode is called with the pairing code an operator approves
	// (`lemon nodes approve CODE`) and its expiry.
	OnCode func(code string, expiresAt time.Time)
	// PollInterval is how often a pending pairing is polled besides the
	// node.pair.resolved event (default 2 s).
	PollInterval time.Duration
	Backoff      Backoff
	Logger       *slog.Logger
	Dialer       *websocket.Dialer
	// CAFile is as Config.CAFile.
	CAFile string
}

// PairError is a pairing failure with a message safe to print: it never
// contains a token, credential, challenge or request secret.
type PairError struct {
	Msg string
	Err *protocol.Error // the controller's error, when there is one
}

func (e *PairError) Error() string { return e.Msg }

func (e *PairError) Unwrap() error {
	if e.Err == nil {
		return nil
	}
	return e.Err
}

// errRetry marks a lost connection: Pair reconnects and resumes.
var errRetry = errors.New("pairing connection lost")

// Pair enrols the node (or re-pairs it) and stores the resulting session
// and recovery credential in cfg.Store. A dropped connection resumes the
// same pairing; an approved pairing whose challenge was lost gets a fresh
// one; a restarted join resumes its pending pairing from the store.
func Pair(ctx context.Context, cfg PairConfig) (*NodeRecord, error) {
	if err := CheckControllerURL(cfg.ControllerURL, cfg.AllowInsecureController); err != nil {
		return nil, err
	}
	if cfg.OperatorToken == "" {
		return nil, &PairError{Msg: "pairing needs an operator token: set LEMON_NODE_OPERATOR_TOKEN (the controller's operator token)"}
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 2 * time.Second
	}
	cfg.Backoff = cfg.Backoff.withDefaults()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &pairing{cfg: cfg, log: log}
	if err := p.plan(); err != nil {
		return nil, err
	}
	p.pending = cfg.Store.LoadPending(cfg.ControllerURL, p.key, time.Now())
	if p.pending != nil && p.pending.Kind != p.kind {
		p.pending = nil
	}
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for attempt := 0; ; attempt++ {
		rec, err := p.session(ctx)
		if err == nil {
			return rec, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, errRetry) {
			return nil, err
		}
		d := cfg.Backoff.Delay(attempt, rnd)
		log.Info("pairing connection lost; resuming", "delay", d.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(d):
		}
	}
}

type pairing struct {
	cfg       PairConfig
	log       *slog.Logger
	kind      string
	key       string // names the pending-pairing file
	params    protocol.PairRequestParams
	pending   *PendingPairing
	codeShown bool
	// lostAnswer is set while re-pairing lostNodeID with the credential a
	// completed pairing whose answer was lost set (see request); plan's
	// kind and params are kept in planKind and planParams.
	lostAnswer            bool
	lostNodeID            string
	planKind              string
	planParams            protocol.PairRequestParams
	triedLost, triedPlain bool
}

// plan chooses the pairing kind and the first request's params.
func (p *pairing) plan() error {
	c := p.cfg
	switch {
	case c.Repair:
		if perr := protocol.RequireNodeID(c.NodeID); perr != nil {
			return &PairError{Msg: "--repair needs --node-id ID"}
		}
		p.kind, p.key = protocol.PairKindRepair, "id:"+c.NodeID
		p.params = protocol.PairRequestParams{NodeID: c.NodeID, Repair: true}
	case c.Existing != nil:
		if c.Existing.RecoveryCredential == "" {
			return &PairError{Msg: "the stored identity has no recovery credential: re-pair it with --pair --repair --node-id " + c.Existing.NodeID}
		}
		p.kind, p.key = protocol.PairKindRecover, "id:"+c.Existing.NodeID
		p.params = protocol.PairRequestParams{NodeID: c.Existing.NodeID, RecoveryCredential: c.Existing.RecoveryCredential}
	default:
		name, perr := protocol.NormalizeNodeName("name", c.Name)
		if perr != nil {
			return &PairError{Msg: "--name: " + perr.Message}
		}
		p.kind, p.key = protocol.PairKindNew, "name:"+name
		p.params = protocol.PairRequestParams{Name: name, NodeType: protocol.NodeTypeExecution, Methods: c.Methods}
	}
	return nil
}

// expectedNodeID is the node ID a re-pairing must come back with.
func (p *pairing) expectedNodeID() string {
	if p.lostAnswer {
		return p.lostNodeID
	}
	if p.cfg.Repair {
		return p.cfg.NodeID
	}
	if p.cfg.Existing != nil {
		return p.cfg.Existing.NodeID
	}
	return ""
}

// operatorAuthError explains a refused operator connect without echoing
// the token.
func operatorAuthError(pe *protocol.Error) error {
	switch {
	case pe.DomainCode() == protocol.DomainAuthNotConfigured:
		return &PairError{Msg: "the controller has no operator authentication configured; set LEMON_CONTROL_PLANE_OPERATOR_TOKEN on the controller", Err: pe}
	case pe.DomainCode() == protocol.DomainOperatorAuthMissing:
		return &PairError{Msg: "the controller received no operator token; set LEMON_NODE_OPERATOR_TOKEN", Err: pe}
	case pe.Code == protocol.CodeUnauthorized:
		return &PairError{Msg: "the controller did not accept the operator token in LEMON_NODE_OPERATOR_TOKEN", Err: pe}
	case pe.Code == protocol.CodeForbidden:
		return &PairError{Msg: "the operator token lacks the operator.pairing scope", Err: pe}
	}
	return &PairError{Msg: "the controller refused the pairing connection (" + pe.Code + ")", Err: pe}
}

// session runs the pairing on one operator connection.
func (p *pairing) session(ctx context.Context) (*NodeRecord, error) {
	resolved := make(chan protocol.PairResolvedEvent, 4)
	conn, err := client.Dial(ctx, p.cfg.ControllerURL, client.Options{
		Token:         p.cfg.OperatorToken,
		Scopes:        []string{protocol.ScopePairing},
		ClientID:      "lemon-node-pair",
		ClientVersion: version.Version,
		Dialer:        p.cfg.Dialer,
		CAFile:        p.cfg.CAFile,
		OnEvent: func(ev protocol.Event) {
			if ev.Event != protocol.EventPairResolved {
				return
			}
			var r protocol.PairResolvedEvent
			if json.Unmarshal(ev.Payload, &r) == nil {
				select {
				case resolved <- r:
				default:
				}
			}
		},
	})
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			if pe.Code == protocol.CodeUnavailable || pe.Code == protocol.CodeRateLimited || pe.Code == protocol.CodeInternal {
				return nil, errRetry
			}
			return nil, operatorAuthError(pe)
		}
		if errors.Is(err, client.ErrCAFile) {
			return nil, &PairError{Msg: err.Error()}
		}
		if client.TrustFailure(err) {
			p.log.Warn("controller unreachable", "reason", safeReason(err))
		} else {
			p.log.Info("controller unreachable", "reason", safeReason(err))
		}
		return nil, errRetry
	}
	defer conn.Close()

	call := func(method string, params any) (json.RawMessage, *protocol.Error, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		raw, perr := conn.Call(cctx, method, params)
		if perr != nil && (perr.DomainCode() == "connection_lost" || perr.Code == protocol.CodeTimeout ||
			(perr.Code == protocol.CodeUnavailable && perr.Details != nil && perr.Details.RetrySafe != nil && *perr.Details.RetrySafe)) {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			return nil, nil, errRetry
		}
		return raw, perr, nil
	}

	// Request a new pairing or resume the pending one.
	var request func() (protocol.PairRequestResult, error)
	request = func() (protocol.PairRequestResult, error) {
		var res protocol.PairRequestResult
		params := p.params
		if p.pending != nil {
			params = protocol.PairRequestParams{PairingID: p.pending.PairingID, RequestSecret: p.pending.RequestSecret}
		}
		raw, perr, err := call(protocol.MethodPairRequest, params)
		if err != nil {
			return res, err
		}
		if perr != nil {
			switch {
			case perr.DomainCode() == protocol.DomainPairingNotFound && p.pending != nil && p.pending.NextRecovery != "" &&
				p.pending.NodeID != "" && !p.triedLost:
				// The challenge exchange may have completed with its answer
				// lost: then the credential it set is the node's now. The
				// pending file stays until the new pairing replaces it.
				p.log.Info("the pairing is gone after its challenge was sent; re-pairing with the credential it set")
				p.triedLost, p.lostAnswer, p.lostNodeID = true, true, p.pending.NodeID
				p.planKind, p.planParams = p.kind, p.params
				p.kind = protocol.PairKindRecover
				p.params = protocol.PairRequestParams{NodeID: p.pending.NodeID, RecoveryCredential: p.pending.NextRecovery}
				p.pending = nil
				return request()
			case perr.DomainCode() == protocol.DomainRecoveryInvalid && p.lostAnswer && !p.triedPlain:
				// The exchange never completed (the pairing expired): pair
				// as planned; a pairing that waits shows its new code.
				p.triedPlain, p.lostAnswer, p.codeShown = true, false, false
				p.kind, p.params = p.planKind, p.planParams
				return request()
			case perr.DomainCode() == protocol.DomainPairingNotFound && p.pending != nil:
				p.cfg.Store.DeletePending(p.cfg.ControllerURL, p.key)
				p.pending = nil
				return res, &PairError{Msg: "the pairing expired or was already completed; run the pairing again", Err: perr}
			case perr.DomainCode() == protocol.DomainNameTaken:
				return res, &PairError{Msg: "another node already holds this name on the controller", Err: perr}
			case perr.DomainCode() == protocol.DomainRecoveryInvalid && p.kind == protocol.PairKindRecover:
				return res, &PairError{Msg: "the controller did not accept the stored recovery credential for this node ID: " +
					"it rotates at every re-pair, so another pairing has used it since (a copy may have been stolen); " +
					"tell an operator, who can see in `lemon nodes` which host now holds the node, and pair this host as a new node", Err: perr}
			case perr.DomainCode() == protocol.DomainRecoveryInvalid:
				return res, &PairError{Msg: "the controller has no paired node with this node ID", Err: perr}
			case perr.DomainCode() == protocol.DomainRepairRefused:
				return res, &PairError{Msg: "the controller refuses to repair this node: it holds a recovery credential; re-pair with --pair (without --repair) from the host that stores it", Err: perr}
			case perr.DomainCode() == protocol.DomainPairingQuota:
				// The token's bound of live pairings (shared by every host
				// joining with it): wait for a place, with backoff.
				p.log.Info("the operator token has too many pairings in progress; retrying")
				return res, errRetry
			case perr.Code == protocol.CodeForbidden || perr.Code == protocol.CodeUnauthorized:
				return res, operatorAuthError(perr)
			}
			return res, &PairError{Msg: "the controller refused the pairing request (" + perr.Code + ")", Err: perr}
		}
		if err := json.Unmarshal(raw, &res); err != nil || res.PairingID == "" {
			return res, &PairError{Msg: "the controller sent a malformed pairing response"}
		}
		if p.pending == nil {
			if res.RequestSecret == "" {
				return res, &PairError{Msg: "the controller sent a pairing without a request secret"}
			}
			p.pending = &PendingPairing{ControllerURL: p.cfg.ControllerURL, Name: p.key, NodeID: res.NodeID,
				Kind: p.kind, PairingID: res.PairingID, RequestSecret: res.RequestSecret, Code: res.Code,
				ExpiresAtMs: res.ExpiresAtMs}
			if err := p.cfg.Store.SavePending(p.pending); err != nil {
				p.log.Warn("pending pairing not saved; a restart starts a new pairing")
			}
		}
		return res, nil
	}

	res, err := request()
	if err != nil {
		return nil, err
	}
	poll := time.NewTicker(p.cfg.PollInterval)
	defer poll.Stop()
	for {
		switch res.Status {
		case protocol.PairStatusRejected:
			p.cfg.Store.DeletePending(p.cfg.ControllerURL, p.key)
			return nil, &PairError{Msg: "an operator rejected the pairing"}
		case protocol.PairStatusApproved:
			if res.Challenge != "" {
				rec, err := p.exchange(call, res)
				if !errors.Is(err, errChallengeLost) {
					return rec, err
				}
				// The challenge was refused (lost or expired): ask for a
				// fresh one on the same pairing.
			}
		case protocol.PairStatusPending:
			if !p.codeShown && p.cfg.OnCode != nil {
				p.cfg.OnCode(res.Code, time.UnixMilli(res.ExpiresAtMs))
			}
			p.codeShown = true
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-conn.Done():
				return nil, errRetry
			case <-resolved:
			case <-poll.C:
			}
		default:
			return nil, &PairError{Msg: "the controller sent an unknown pairing status"}
		}
		if res, err = request(); err != nil {
			return nil, err
		}
	}
}

var errChallengeLost = errors.New("challenge refused")

// exchange trades the one-time challenge for a session and stores it.
// The next recovery credential is chosen here and saved with the pending
// pairing before the request is sent, so a lost answer leaves the node a
// credential that works (see request).
func (p *pairing) exchange(call func(string, any) (json.RawMessage, *protocol.Error, error), res protocol.PairRequestResult) (*NodeRecord, error) {
	next := ""
	if p.pending != nil {
		if p.pending.NextRecovery == "" || p.pending.NodeID != res.NodeID {
			p.pending.NextRecovery, p.pending.NodeID = newRecoveryCredential(), res.NodeID
			if err := p.cfg.Store.SavePending(p.pending); err != nil {
				p.log.Warn("pending pairing not saved; the controller chooses the recovery credential")
				p.pending.NextRecovery = ""
			}
		}
		next = p.pending.NextRecovery
	}
	raw, perr, err := call(protocol.MethodConnectChallenge,
		protocol.ConnectChallengeParams{PairingID: res.PairingID, Challenge: res.Challenge, NextRecoveryCredential: next})
	if err != nil {
		return nil, err
	}
	if perr != nil {
		switch perr.DomainCode() {
		case protocol.DomainChallengeInvalid:
			return nil, errChallengeLost
		case protocol.DomainPairingRejected:
			p.cfg.Store.DeletePending(p.cfg.ControllerURL, p.key)
			return nil, &PairError{Msg: "an operator rejected the pairing", Err: perr}
		case protocol.DomainNameTaken:
			return nil, &PairError{Msg: "another node already holds this name on the controller", Err: perr}
		case protocol.DomainRecoveryInvalid:
			p.cfg.Store.DeletePending(p.cfg.ControllerURL, p.key)
			return nil, &PairError{Msg: "the controller did not accept the stored recovery credential for this node ID: " +
				"another pairing used it first (a copy may have been stolen); tell an operator", Err: perr}
		case protocol.DomainRepairRefused:
			p.cfg.Store.DeletePending(p.cfg.ControllerURL, p.key)
			return nil, &PairError{Msg: "the controller refuses to repair this node: it holds a recovery credential", Err: perr}
		}
		return nil, &PairError{Msg: "the controller refused the challenge (" + perr.Code + ")", Err: perr}
	}
	var cr protocol.ConnectChallengeResult
	if err := json.Unmarshal(raw, &cr); err != nil || cr.NodeID == "" || cr.SessionToken == "" {
		return nil, &PairError{Msg: "the controller sent a malformed session"}
	}
	if want := p.expectedNodeID(); want != "" && cr.NodeID != want {
		return nil, &PairError{Msg: "the controller paired a different node ID than the one re-paired; refusing it",
			Err: protocol.DomainError(protocol.CodeConflict, protocol.DomainNodeIdentityMismatch, "node ID changed")}
	}
	rec := &NodeRecord{NodeID: cr.NodeID, Name: cr.Name, JoinName: p.joinName(cr), ControllerURL: p.cfg.ControllerURL,
		SessionToken: cr.SessionToken, SessionExpiresAtMs: cr.ExpiresAtMs, SessionGeneration: cr.SessionGeneration,
		RecoveryCredential: cr.RecoveryCredential}
	if rec.RecoveryCredential == "" && p.cfg.Existing != nil && p.cfg.Existing.NodeID == rec.NodeID {
		// A controller that does not rotate the credential keeps the old one.
		rec.RecoveryCredential = p.cfg.Existing.RecoveryCredential
	}
	// One atomic write replaces session and credential together: the old
	// credential no longer works on the controller.
	if err := p.cfg.Store.Save(rec); err != nil {
		return nil, &PairError{Msg: "paired, but the session and the new recovery credential could not be stored: " + strings.TrimPrefix(err.Error(), "token store: ")}
	}
	p.cfg.Store.DeletePending(p.cfg.ControllerURL, p.key)
	return rec, nil
}

// joinName is the JoinName of the record a pairing stores: a re-paired
// identity keeps the name it was first joined with (an older record's
// stored name stands in), so a rename on the controller, which the new
// record's Name reflects, does not hide it from `--name ORIGINAL`. A new
// node's is the --name it was paired with.
func (p *pairing) joinName(cr protocol.ConnectChallengeResult) string {
	prev := p.cfg.Existing
	if prev == nil && p.cfg.Repair {
		// A repaired identity may have a (legacy) record of its own.
		prev, _ = p.cfg.Store.Load(cr.NodeID, p.cfg.ControllerURL)
	}
	if prev != nil && prev.NodeID == cr.NodeID {
		if n := prev.LocalName(); n != "" {
			return n
		}
	}
	if n, perr := protocol.NormalizeNodeName("name", p.cfg.Name); perr == nil {
		return n
	}
	return cr.Name
}

// newRecoveryCredential returns "lnr_" + 32 random bytes in base64url.
func newRecoveryCredential() string {
	b := make([]byte, 32)
	if _, err := crand.Read(b); err != nil {
		panic("worker: crypto/rand failed")
	}
	return "lnr_" + base64.RawURLEncoding.EncodeToString(b)
}

// String never prints credentials.
func (r *NodeRecord) String() string {
	return fmt.Sprintf("node %s (%s) at %s", r.NodeID, r.Name, r.ControllerURL)
}
