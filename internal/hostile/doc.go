// Package hostile holds the hostile-input regression probes of issue 38
// that cross components: every file key of a configuration and of a
// control request pointed at /dev/zero or a FIFO, a YAML alias bomb as a
// config file and as a request body, a secret-looking file named where a
// calibration belongs. Each probe runs in a child process under a
// virtual memory cap (package capped), so that a regression fails that
// child quickly instead of thrashing the machine, and the child's peak
// resident memory is held to the runtime's goal (300 MB). The broker
// store's damages are probed beside it (alerts/broker).
package hostile
