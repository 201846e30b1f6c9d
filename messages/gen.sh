#!/usr/bin/env bash
# Regenerates the Go code for troupe.proto; with --check, fails if the committed
# troupe.pb.go differs from what the .proto generates (drift).
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
  protoc --go_out="$tmp" --go_opt=paths=source_relative troupe.proto
  if ! diff -u troupe.pb.go "$tmp/troupe.pb.go"; then
    echo "messages/troupe.pb.go is stale: run messages/gen.sh and commit the result" >&2
    exit 1
  fi
  echo "messages: generated code matches troupe.proto"
  exit 0
fi
protoc --go_out=. --go_opt=paths=source_relative troupe.proto
