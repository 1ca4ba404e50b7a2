// Package testnet holds the network helpers of tests that start real peers
// (mosquitto, the runtime's servers) on 127.0.0.1: a free port to give
// them, and a wait until they listen.
//
// It imports package testing: only tests may import it.
package testnet
