#!/usr/bin/env bash
# arm64 smoke test under qemu-user: runs the depth model and the AuxUE on a
# few deterministic synthetic frames with the amd64 binary (x64 ONNX Runtime)
# and with the arm64 binary under qemu-aarch64 (arm64 ONNX Runtime), then
# checks that the depth, Laplace scale and epistemic maps agree within
# SMOKE_TOL (max abs, default 1e-3; the relative figure is printed too).
# Then runs pkg/nn's tests on arm64 (the NEON training kernels).
#
# Models: when models/MANIFEST exists, the reference models models/depth.onnx
# (with its IO spec models/depth.yaml, which also sets the frame size) and
# models/auxue.onnx; otherwise TEST networks with seeded random weights
# exported by `didoedge model export-test` (64x192).
#
# Needs: bin/linux-arm64/didoedge (rebuilt with cross/build-arm64.sh when
# missing or older than a .go file), qemu-user (installed when missing), and
# the ONNX Runtime libraries from scripts/deps.sh.
# Environment: SMOKE_FRAMES (3), SMOKE_SEED (1), SMOKE_TOL (1e-3), SMOKE_OUT
# (a temporary directory, removed afterwards unless set).
set -euo pipefail
cd "$(dirname "$0")/.."

TRIPLET=aarch64-linux-gnu
ARM_BIN=bin/linux-arm64/didoedge
HOST_BIN=bin/linux-amd64/didoedge
# x64 on 1.29.0, arm64 on 1.24.1 (scripts/deps.sh says why).
X64_LIB=third_party/onnxruntime/1.29.0/linux-x64/libonnxruntime.so.1
ARM64_LIB=third_party/onnxruntime/1.24.1/linux-arm64/libonnxruntime.so.1
FRAMES=${SMOKE_FRAMES:-3}
SEED=${SMOKE_SEED:-1}
TOL=${SMOKE_TOL:-1e-3}

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
say() { echo "smoke-qemu: $*"; }

if [ "$(uname -m)" != x86_64 ]; then
  say "this script compares an amd64 host run with an emulated arm64 run; host is $(uname -m)" >&2
  exit 1
fi
if ! command -v qemu-aarch64 >/dev/null; then
  say "installing qemu-user"
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user >/dev/null
fi
if [ ! -f "$ARM64_LIB" ] || [ ! -f "$X64_LIB" ]; then
  bash scripts/deps.sh
fi
if [ ! -x "$ARM_BIN" ] || [ -n "$(find . -name '*.go' -not -path './third_party/*' -newer "$ARM_BIN" -print -quit)" ]; then
  bash cross/build-arm64.sh
fi
mkdir -p "$(dirname "$HOST_BIN")"
go build -o "$HOST_BIN" ./cmd/didoedge

if [ -n "${SMOKE_OUT:-}" ]; then
  out=$SMOKE_OUT
  rm -rf "$out/amd64" "$out/arm64" "$out/models"
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

spec_args=()
if [ -f models/MANIFEST ]; then
  # The reference models as `didoedge train` writes them (offline); auxue.yaml beside auxue.onnx is read too.
  depth=models/depth.onnx auxue=models/auxue.onnx spec=models/depth.yaml
  for f in "$depth" "$auxue" "$spec"; do
    [ -f "$f" ] || { say "models/MANIFEST exists but $f is missing" >&2; exit 1; }
  done
  spec_args=(--depth-spec "$spec")
  say "reference models from models/MANIFEST: $depth ($spec), $auxue"
else
  "$HOST_BIN" model export-test --out "$out/models" --height 64 --width 192 --seed "$SEED" >/dev/null
  depth=$out/models/test-depth-tinyunet.onnx
  auxue=$out/models/test-auxue.onnx
  spec_args=(--height 64 --width 192)
  say "no models/MANIFEST: using TEST networks with seeded random weights (64x192)"
fi

run_args=(model run --depth "$depth" --auxue "$auxue" --frames "$FRAMES" --seed "$SEED" "${spec_args[@]}")

say "amd64 run"
ONNXRUNTIME_LIB="$PWD/$X64_LIB" "$HOST_BIN" "${run_args[@]}" --out "$out/amd64"

# The arm64 run finds its ONNX Runtime through the project-local lookup
# (third_party/.../linux-arm64/), which is what this checks: ONNXRUNTIME_LIB
# is unset. The cross glibc comes first so that the loader and libc match;
# the multiarch directories supply libavcodec and its dependencies.
say "arm64 run under qemu-aarch64"
start=$(date +%s)
env -u ONNXRUNTIME_LIB \
  QEMU_LD_PREFIX=/usr/$TRIPLET \
  LD_LIBRARY_PATH=/usr/$TRIPLET/lib:/usr/lib/$TRIPLET:/lib/$TRIPLET \
  qemu-aarch64 -L /usr/$TRIPLET "$ARM_BIN" "${run_args[@]}" --out "$out/arm64"
say "arm64 run took $(( $(date +%s) - start )) s"

if ! grep -q '"goarch": "arm64"' "$out/arm64/summary.json" || ! grep -q 'linux-arm64/libonnxruntime.so.1' "$out/arm64/summary.json"; then
  say "the arm64 run did not report goarch arm64 with the arm64 ONNX Runtime library" >&2
  exit 1
fi
"$HOST_BIN" model compare "$out/amd64" "$out/arm64" --tol "$TOL"
say "ok: arm64 maps match amd64 within $TOL"

# The training kernels: pkg/nn's tests on arm64 compare the NEON tile and
# dot kernels with the Go ones and with float64 sums, and every layer with
# its reference (direct convolution loops, finite-difference gradients).
say "pkg/nn tests (NEON kernels) under qemu-aarch64"
CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go test -c -o "$out/nn_arm64.test" ./pkg/nn
(cd pkg/nn && qemu-aarch64 -L /usr/$TRIPLET "$out/nn_arm64.test" -test.count=1)
say "ok: pkg/nn passes on arm64"
