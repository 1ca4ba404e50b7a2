#!/usr/bin/env bash
# Counts, under qemu-aarch64, the arm64 instructions of one Conv2d
# Forward+Backward step (pkg/nn BenchmarkConv2dPaths, batch 1) on the NEON
# kernels and on the portable Go kernels, and prints their ratio. qemu cannot
# time arm64 code; it executes exactly the guest's instructions, so the
# ratio of instruction counts is what it can measure (a NEON FMLA does 8
# flops, so instructions are a lower bound on the speed-up, not a timing).
#
# The count comes from cross/insncount/insncount.c, a QEMU TCG plugin built
# here with the host gcc. Each benchmark runs once with -test.benchtime 1x
# and once with 3x (the framework adds one warm-up step to both); the
# difference is two steps, which removes start-up and set-up.
#
# Needs: qemu-user (installed when missing), gcc, Go. Usage:
#   bash cross/kernel-insns.sh [benchmark regexp, default all cases]
set -euo pipefail
cd "$(dirname "$0")/.."

TRIPLET=aarch64-linux-gnu
sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v qemu-aarch64 >/dev/null; then
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -Wall -shared -fPIC -o "$tmp/insncount.so" cross/insncount/insncount.c
CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go test -c -o "$tmp/nn.test" ./pkg/nn

qemu=(qemu-aarch64 -plugin "$tmp/insncount.so")
[ -d /usr/$TRIPLET ] && qemu+=(-L /usr/$TRIPLET)
count() { # benchmark, benchtime -> instructions of the whole run
  GOMAXPROCS=1 GOGC=off "${qemu[@]}" "$tmp/nn.test" -test.run '^$' -test.bench "$1" -test.benchtime "$2" 2>&1 >/dev/null |
    sed -n 's/^insncount: //p'
}
cases=$(GOMAXPROCS=1 "${qemu[@]}" "$tmp/nn.test" -test.run '^$' -test.bench "${1:-BenchmarkConv2dPaths}" -test.benchtime 1x 2>/dev/null |
  sed -n 's|^BenchmarkConv2dPaths/\([^/]*\)/asm.*|\1|p')
[ -n "$cases" ] || { echo "kernel-insns: no BenchmarkConv2dPaths case matched" >&2; exit 1; }
printf '%-26s %16s %16s %8s\n' "case (one fwd+bwd step)" "NEON insns" "portable insns" "ratio"
for c in $cases; do
  declare -A per
  for path in asm portable; do
    re="^BenchmarkConv2dPaths\$/^$c\$/^$path\$"
    one=$(count "$re" 1x); three=$(count "$re" 3x)
    [ -n "$one" ] && [ -n "$three" ] || { echo "kernel-insns: no count for $c/$path" >&2; exit 1; }
    per[$path]=$(( (three - one) / 2 ))
  done
  awk -v c="$c" -v a="${per[asm]}" -v p="${per[portable]}" 'BEGIN { printf "%-26s %16.0f %16.0f %8.2f\n", c, a, p, p / a }'
done
