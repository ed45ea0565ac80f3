#!/usr/bin/env bash
# build.sh           build the module set (plugins/* → wasip1 reactors + manifest) and bin/lemon
# build.sh test      build, then vet and run every test
# build.sh bench     build, then run the benchmarks
# build.sh dist      build, then cross-build static binaries into dist/ with SHA256SUMS
set -euo pipefail
cd "$(dirname "$0")"

SET=host/moduleset/defaultset/set
# Tests that measure latency percentiles; build.sh test runs them alone.
QUIET_TESTS='^TestBulk1GiBBoundedRSSResponsive$'
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
# Binaries are static: no libc at run time, so one file runs on any Linux
# (or macOS) of its architecture (docs/DEPLOY.md, "Install").
export CGO_ENABLED=0
# The operator side builds for these; the node runs on Linux only.
PLATFORMS="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"

build_modules() {
  # Build into a scratch directory and swap the files in at the end, so a
  # test binary built meanwhile never sees a half-written set.
  local tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/lemon-set.XXXXXX")
  trap 'rm -rf "$tmp"' RETURN
  for dir in plugins/*/; do
    name=$(basename "$dir")
    [ "$name" = sdk ] && continue
    compgen -G "$dir*.go" >/dev/null || continue
    GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o "$tmp/$name.wasm" "./$dir"
  done
  go run ./host/moduleset/mkset "$tmp"
  for f in "$SET"/*.wasm; do
    [ -e "$f" ] && [ ! -e "$tmp/$(basename "$f")" ] && rm -f "$f"
  done
  for f in "$tmp"/*.wasm; do
    cp "$f" "$SET/.$(basename "$f").new" && mv -f "$SET/.$(basename "$f").new" "$SET/$(basename "$f")"
  done
  cp "$tmp/manifest.json" "$SET/.manifest.json.new" && mv -f "$SET/.manifest.json.new" "$SET/manifest.json"
}

# build_sdk copies the guest-side SDK (plugins/sdk, its typed wrappers plugins/sdk/*, and every lemon package
# it imports, for wasip1 and for the native build) into cmd/lemon so
# bin/lemon embeds it and `lemon plugin new` scaffolds offline. It refuses
# a non-stdlib dependency: a scaffold cannot fetch one.
build_sdk() {
  local dst=cmd/lemon/internal/sdkembed/_sdk tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/lemon-sdk.XXXXXX")
  trap 'rm -rf "$tmp"; trap - RETURN' RETURN
  local fmt='{{if not .Standard}}{{.ImportPath}} {{.Dir}} {{join .GoFiles " "}}{{end}}'
  { GOOS=wasip1 GOARCH=wasm go list -deps -f "$fmt" ./plugins/sdk/... ./protocol; go list -deps -f "$fmt" ./plugins/sdk/... ./protocol; } | sort -u |
    while read -r path dir files; do
      [ -n "$path" ] || continue
      case "$path" in
        lemon/*) ;;
        *) echo "build.sh: the plugin SDK imports $path, which is not stdlib or lemon" >&2; return 1 ;;
      esac
      mkdir -p "$tmp/tree/${path#lemon/}"
      for f in $files; do cp "$dir/$f" "$tmp/tree/${path#lemon/}/$f"; done
    done
  go list -m -f '{{.GoVersion}}' >"$tmp/GOVERSION"
  rm -rf "$dst/tree" "$dst/GOVERSION"
  mv "$tmp/tree" "$dst/tree"
  mv "$tmp/GOVERSION" "$dst/GOVERSION"
}

build_binary() {
  build_sdk
  mkdir -p bin
  go build -trimpath -o bin/lemon ./cmd/lemon
}

# check_static fails unless bin/lemon was built without cgo and has no ELF
# interpreter (a dynamically linked binary names ld.so there).
check_static() {
  go version -m bin/lemon | grep -q 'CGO_ENABLED=0' || { echo "build.sh: bin/lemon was built with cgo" >&2; return 1; }
  if command -v readelf >/dev/null && readelf -l bin/lemon 2>/dev/null | grep -q 'INTERP'; then
    echo "build.sh: bin/lemon is dynamically linked" >&2
    return 1
  fi
}

# cross_check builds ./cmd/lemon for every platform and discards the result.
cross_check() {
  local p
  for p in $PLATFORMS; do
    GOOS=${p%/*} GOARCH=${p#*/} go build -trimpath -o /dev/null ./cmd/lemon
  done
}

# dist cross-builds dist/lemon-OS-ARCH for every platform, plus SHA256SUMS.
dist() {
  local p out
  rm -rf dist
  mkdir -p dist
  for p in $PLATFORMS; do
    out="dist/lemon-${p%/*}-${p#*/}"
    GOOS=${p%/*} GOARCH=${p#*/} go build -trimpath -o "$out" ./cmd/lemon
  done
  (cd dist && if command -v sha256sum >/dev/null; then sha256sum lemon-*; else shasum -a 256 lemon-*; fi >SHA256SUMS)
}

case "${1:-build}" in
  build)
    build_modules
    build_binary
    echo "build.sh: built bin/lemon (module set in $SET)"
    ;;
  test)
    build_modules
    build_binary
    go mod tidy -diff
    check_static
    cross_check
    go vet ./...
    GOOS=wasip1 GOARCH=wasm go vet ./plugins/... ./examples/...
    # The latency test of control calls during a 1 GiB transfer measures a
    # p99, so it runs alone after the rest, not beside other packages.
    go test -count=1 -timeout 12m -skip "$QUIET_TESTS" "${@:2}" ./...
    go test -count=1 -timeout 5m -run "$QUIET_TESTS" "${@:2}" ./cmd/lemon/e2e/
    ;;
  bench)
    build_modules
    build_binary
    go test -run '^$' -bench "${2:-.}" -benchtime "${BENCHTIME:-1s}" ./...
    ;;
  dist)
    build_modules
    build_sdk
    dist
    echo "build.sh: wrote dist/ ($(cd dist && echo lemon-*)) and dist/SHA256SUMS"
    ;;
  *)
    echo "usage: ./build.sh [build|test|bench|dist]" >&2
    exit 2
    ;;
esac
