#!/usr/bin/env bash
# Regenerates the Go code for wire.proto; with --check, fails if the committed
# wire.pb.go differs from what the .proto generates (drift).
# Needs protoc (Debian: protobuf-compiler); installs protoc-gen-go at go.mod's version.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$(go env GOPATH)/bin:$PATH"
want=$(go list -m -f '{{.Version}}' google.golang.org/protobuf)
if ! protoc-gen-go --version 2>/dev/null | grep -q -- "${want}"; then
  go install "google.golang.org/protobuf/cmd/protoc-gen-go@${want}"
fi
if [[ "${1:-}" == "--check" ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  protoc --go_out="$tmp" --go_opt=paths=source_relative wire.proto
  if ! diff -u wire.pb.go "$tmp/wire.pb.go"; then
    echo "cluster/wire/wire.pb.go is stale: run cluster/wire/gen.sh and commit the result" >&2
    exit 1
  fi
  echo "cluster/wire: generated code matches wire.proto"
  exit 0
fi
protoc --go_out=. --go_opt=paths=source_relative wire.proto
