#!/usr/bin/env bash
# Regenerates the Go code of one .proto file in the current directory; with --check, fails
# if the committed .pb.go differs from what the .proto generates (drift).
#   .ci/protoc-go.sh FILE.proto [--check]     (run from the .proto's directory)
# Needs protoc (Debian: protobuf-compiler); installs protoc-gen-go at go.mod's version.
# messages/gen.sh and cluster/wire/gen.sh call it.
set -euo pipefail
proto="$1"
base="${proto%.proto}"
rel="$(realpath --relative-to="$(cd "$(dirname "$0")/.." && pwd)" "$PWD")"
export PATH="$(go env GOPATH)/bin:$PATH"
want=$(go list -m -f '{{.Version}}' google.golang.org/protobuf)
if ! protoc-gen-go --version 2>/dev/null | grep -q -- "${want}"; then
  go install "google.golang.org/protobuf/cmd/protoc-gen-go@${want}"
fi
if [[ "${2:-}" == "--check" ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  protoc --go_out="$tmp" --go_opt=paths=source_relative "$proto"
  if ! diff -u "$base.pb.go" "$tmp/$base.pb.go"; then
    echo "$rel/$base.pb.go is stale: run $rel/gen.sh and commit the result" >&2
    exit 1
  fi
  echo "$rel: generated code matches $proto"
  exit 0
fi
protoc --go_out=. --go_opt=paths=source_relative "$proto"
