// Package integration holds the end-to-end tests (routerd in lab mode driven
// over HTTP, with real peers) and the benchmarks measured against the peers
// an operator would otherwise pick.
package integration
