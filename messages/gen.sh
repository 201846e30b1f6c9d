#!/usr/bin/env bash
# Regenerates the Go code for troupe.proto; with --check, fails on drift (see .ci/protoc-go.sh).
set -euo pipefail
cd "$(dirname "$0")"
exec ../.ci/protoc-go.sh troupe.proto "$@"
