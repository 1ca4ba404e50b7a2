// Package capped runs a test's probe in a child process under a virtual
// memory cap (the shell's ulimit -v) and a time limit: a probe that would
// make the code under test allocate without bound (a file key naming
// /dev/zero, a YAML alias bomb) then fails that child quickly instead of
// thrashing the machine that runs the tests. The parent test reports the
// child's outcome, its peak resident memory and its duration.
package capped
