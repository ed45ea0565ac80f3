#!/usr/bin/env bash
# build.sh           build the module set (plugins/* → wasip1 reactors + manifest) and bin/lemon
# build.sh test      build, then vet and run every test
# build.sh bench     build, then run the benchmarks
set -euo pipefail
cd "$(dirname "$0")"

SET=host/moduleset/defaultset/set
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

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

build_binary() {
  mkdir -p bin
  go build -trimpath -o bin/lemon ./cmd/lemon
}

case "${1:-build}" in
  build)
    build_modules
    build_binary
    ;;
  test)
    build_modules
    build_binary
    go vet ./...
    GOOS=wasip1 GOARCH=wasm go vet ./plugins/...
    go test -count=1 -timeout 12m "${@:2}" ./...
    ;;
  bench)
    build_modules
    build_binary
    go test -run '^$' -bench "${2:-.}" -benchtime "${BENCHTIME:-1s}" ./...
    ;;
  *)
    echo "usage: ./build.sh [build|test|bench]" >&2
    exit 2
    ;;
esac
