// Package cross holds the arm64 / Jetson deployment files: the cross build
// and qemu smoke scripts (build-arm64.sh, smoke-qemu.sh), the systemd unit
// (didoedge.service, didoedge-health.service/.timer) and the tests that keep
// configs/jetson-orin.yaml parseable by the real config parsers. It has no
// code of its own; the smoke test's logic lives in offline/modeltool.
package cross
