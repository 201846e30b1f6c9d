#!/usr/bin/env bash
# Regenerates the Go code for troupe.proto. Needs protoc (Debian: protobuf-compiler)
# and protoc-gen-go at the version go.mod pins.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$(go env GOPATH)/bin:$PATH"
want=$(go list -m -f '{{.Version}}' google.golang.org/protobuf)
if ! protoc-gen-go --version 2>/dev/null | grep -q "${want}"; then
  go install "google.golang.org/protobuf/cmd/protoc-gen-go@${want}"
fi
protoc --go_out=. --go_opt=paths=source_relative troupe.proto
