// Package wire holds the protobuf messages troupe's cluster sends between nodes
// (wire.proto; regenerate with gen.sh, which .ci/run also runs with --check).
package wire
