//go:build race

package main

// raceBuild: this test binary runs under the race detector, so the end-to-end test
// builds the demo with -race too (and finds its packages in the build cache).
const raceBuild = true
