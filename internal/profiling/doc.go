// Package profiling writes the profiles the long commands offer
// (--cpuprofile, --memprofile): a CPU profile of the whole run, and a heap
// profile taken when the live heap was largest; and the Go heap's soft
// limit they take (--memory-limit).
package profiling
