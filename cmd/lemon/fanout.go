package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"lemon/protocol"
)

// parseNodeFilter reads --nodes: comma-separated terms name=PREFIX,
// online, offline; "" (--all) selects every node.
func parseNodeFilter(s string) (protocol.NodeFilter, error) {
	var f protocol.NodeFilter
	if s == "" {
		return f, nil
	}
	for _, term := range strings.Split(s, ",") {
		term = strings.TrimSpace(term)
		switch {
		case term == "online" || term == "offline":
			on := term == "online"
			if f.Online != nil && *f.Online != on {
				return f, errors.New("online and offline exclude each other")
			}
			f.Online = &on
		case strings.HasPrefix(term, "name="):
			p := strings.TrimPrefix(term, "name=")
			if p == "" || len(p) > 128 || f.NamePrefix != "" {
				return f, errors.New("name= takes one prefix of 1 to 128 bytes")
			}
			f.NamePrefix = p
		default:
			return f, errors.New("terms are name=PREFIX, online and offline")
		}
	}
	return f, nil
}

// fanoutLine is what lemon call --all/--nodes prints per node.
type fanoutLine struct {
	NodeID                 string          `json:"nodeId"`
	Name                   string          `json:"name,omitempty"`
	OK                     bool            `json:"ok"`
	Result                 json.RawMessage `json:"result,omitempty"`
	Error                  *protocol.Error `json:"error,omitempty"`
	RetrySafe              bool            `json:"retrySafe"`
	MutationMayHaveApplied bool            `json:"mutationMayHaveApplied"`
}

// runFanout is lemon call --all/--nodes: one node.fanout request, one JSON
// line per node.fanout.result event, then the summary. Exit 1 when the
// fan-out is refused, matched no node ("lemon call: no node matched" on
// stderr) or any node failed.
func runFanout(ctx context.Context, sess operatorSession, method string, args json.RawMessage, f protocol.NodeFilter, concurrency int, stdout, stderr io.Writer) int {
	var (
		mu     sync.Mutex
		failed int
	)
	notice := sess.onEvent
	sess.onEvent = func(ev protocol.Event) {
		if ev.Event != protocol.EventFanoutResult {
			if notice != nil {
				notice(ev)
			}
			return
		}
		var r protocol.FanoutResult
		if json.Unmarshal(ev.Payload, &r) != nil {
			return
		}
		b, err := json.Marshal(fanoutLine{NodeID: r.NodeID, Name: r.Name, OK: r.OK, Result: r.Result, Error: r.Error,
			RetrySafe: r.RetrySafe, MutationMayHaveApplied: r.MutationMayHaveApplied})
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !r.OK {
			failed++
		}
		stdout.Write(append(b, '\n'))
	}
	conn, perr := sess.dial(ctx, "lemon-call")
	if perr != nil {
		printErrorObject(stderr, perr)
		return 1
	}
	defer conn.Close()
	payload, perr := conn.Call(ctx, protocol.MethodNodeFanout, protocol.FanoutParams{Method: method, Args: args,
		Filter: &f, Concurrency: concurrency})
	if perr != nil {
		printErrorObject(stderr, perr)
		return 1
	}
	var sum protocol.FanoutSummary
	if json.Unmarshal(payload, &sum) != nil {
		fmt.Fprintln(stderr, "lemon call: malformed node.fanout payload")
		return 1
	}
	b, _ := json.Marshal(map[string]protocol.FanoutSummary{"summary": sum})
	mu.Lock()
	defer mu.Unlock()
	stdout.Write(append(b, '\n'))
	if sum.Total == 0 {
		// A filter that matched nothing did nothing: not a success.
		fmt.Fprintln(stderr, "lemon call: no node matched")
		return 1
	}
	if sum.Failed > 0 || failed > 0 {
		return 1
	}
	return 0
}
