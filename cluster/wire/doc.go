// Package wire holds the protobuf messages troupe's cluster sends between nodes
// (wire.proto; regenerate with `protoc --go_out=. --go_opt=paths=source_relative wire.proto`).
package wire
