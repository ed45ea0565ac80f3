// Package e2e holds end-to-end tests and benchmarks of the real lemon
// binary: TestMain builds lemon/cmd/lemon once into a temporary directory,
// and every test starts `lemon dev`, `lemon controller`, `lemon node join`,
// `lemon call`, `lemon run`, `lemon fs` and `lemon vault` as subprocesses, with HOME set
// to a temporary directory and every socket on 127.0.0.1.
//
// What the tests prove (the "Must show" lists of issues 2–5):
//
//   - TestDevHostInfo: node.host.info through `lemon dev` reports this
//     machine's nproc, MemTotal, statfs of the cwd and /proc/uptime; bad
//     tokens, missing nodeId and unknown nodes get their error codes and
//     `lemon call` its exit codes; SIGINT stops `lemon dev` with exit 0
//     and no process left behind.
//   - TestFSPutGet100MiB: `lemon fs put` then `lemon fs get` of 100 MiB of
//     random bytes round-trip byte-identical; MB/s each way is logged.
//   - TestProcessThroughController: the spec's python3 echo receipt; a
//     worker killed with SIGKILL mid-run and restarted answers
//     outcome_unknown and never runs the command again; a canary in argv,
//     stdin and output reaches no log and no file of the node.
//   - TestSecretsThroughController: set with an operationId, receipt,
//     repeated set writes nothing; a canary name and value reach no log and
//     no file except the vault, and the vault holds neither in clear, hex
//     or base64.
//   - TestConnectionFloodLowFDLimit: `lemon controller` with RLIMIT_NOFILE
//     1024 takes 2,000 idle keep-alive /healthz sockets and then 2,000
//     WebSocket upgrades that never connect; it holds no more than its
//     unauthenticated caps, an operator keeps working throughout, and the
//     descriptor count returns to baseline once the idle and handshake
//     timeouts pass (issue 9).
//   - TestPluginAuthorPathWithTheStockBinary: docs/PLUGINS.md "Your first
//     plugin" with the built binary, offline (GOPROXY=off, empty module
//     cache): plugin new, build, conformance, plugin run, modules export,
//     plugin build --set, lemon dev --module-set serving the new method
//     (issue 10).
//   - TestCLIAgainstDev: `lemon run` by node name sends stdin, prints the
//     output decoded and exits with the remote code (128+N for a signal),
//     and `--get` prints that receipt again; `lemon call` resolves a node
//     name in params.nodeId; `lemon nodes --json` is flat; `lemon fs rm`
//     with stdin from /dev/null refuses (exit 1) without --yes; SIGINT
//     makes `lemon call` and `lemon run` exit 130 and the node stops the
//     run (issue 13).
//   - TestTLSDevCAEndToEnd: `lemon tls dev` makes a CA (kept when run
//     again); a controller serves wss:// with its certificate; a node pairs
//     and serves with --ca-file; `lemon nodes`, `call` and `run` work with
//     --ca-file or LEMON_CA_FILE; without the CA the CLI says the
//     authority is unknown and names --ca-file; ws:// against the TLS
//     listener says to use wss:// (issue 13).
//   - TestDeployExamplePolicies and TestDeployUnitsVerify: deploy/'s
//     example policies pass `lemon policy check`; its units carry the
//     promised hardening and pass `systemd-analyze verify` where that tool
//     is installed (issue 13).
//   - TestConsoleInBrowser: the web console (docs/CONSOLE.md) in a real
//     headless Chromium driven with chromedp against `lemon dev --operators`:
//     log in and see the live dev node, whose name `<img src=x
//     onerror=alert(1)>` renders as text (no img element, no dialog); node
//     detail with live node.host.info and its audit records; Overview
//     charts; Module set; the Audit tail filtered; a node joining with a
//     pairing-only token is approved in the Pairings page and comes online;
//     a node.host.info held by an operator policy (require_approval) is
//     approved in the Approvals page and the held call completes;
//     the approve POST without (or with a wrong) CSRF token is refused 403;
//     a read-only login sees no approve or reject control and its direct
//     POSTs with a valid CSRF token are refused 403. A PNG of each page is
//     saved ($LEMON_CONSOLE_SCREENSHOTS, else a kept temporary directory).
//     Without chromium it skips, unless CI is set (issue 16).
//
// Benchmarks (BenchmarkE2E*) measure through a real `lemon dev`, with the
// client package in-process as the operator:
//
//	./build.sh && go test -run '^$' -bench E2E ./cmd/lemon/e2e/
//
// The tests need the module set that ./build.sh writes into
// host/moduleset/defaultset/set; without it TestMain fails and says so:
//
//	./build.sh && go test ./cmd/lemon/e2e/
//
// The package has no non-test code.
package e2e
