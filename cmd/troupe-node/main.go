// Command troupe-node runs one member of a troupe cluster against a shared
// PostgreSQL (see the README's "Cluster" section). It reads JSON commands on
// stdin ({"req":1,"op":"followup","id":"c1","sender":"p1","cred":"…","content":"hi"}; a start's reply carries the cred) and
// writes JSON replies and events on stdout.
package main

import (
	"os"

	"github.com/troupe-rt/troupe/cluster"
)

func main() { os.Exit(cluster.RunNode(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
