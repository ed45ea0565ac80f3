// Package pairinge2e holds end-to-end tests of node pairing and durable
// node identity (issue 6; docs/PROTOCOL.md, "Pairing and durable node
// identity") run
// against the real binary: TestMain builds bin/lemon once, and every test
// starts `lemon controller`, `lemon node join`, `lemon nodes` and
// `lemon call` as subprocesses with HOME set to a temporary directory, on
// 127.0.0.1 only.
//
// The tests need the module set that ./build.sh writes into
// host/moduleset/defaultset/set; without it TestMain fails and says so.
//
//	./build.sh && go test ./cmd/lemon/pairing_e2e/
//
// TestRestartUnder1000Nodes (restart a controller subprocess under 1,000
// in-process simulated workers; time to all online, the controller's peak
// RSS, the spread of reconnect times) runs only with LEMON_BENCH_1000=1:
//
//	LEMON_BENCH_1000=1 go test -run TestRestartUnder1000Nodes -v ./cmd/lemon/pairing_e2e/
//
// The package has no non-test code.
package pairinge2e
