#!/usr/bin/env bash
# Installs what the tests and the demo need on a fresh Debian machine:
# Debian packages (libavcodec for the build; ffmpeg, mosquitto, python3-onnx,
# python3-torch, chromium for the tests) and the pinned ONNX Runtime libraries (x64 and arm64)
# under third_party/onnxruntime/. Idempotent: a second run only checks.
#
#   bash scripts/deps.sh            everything the tests need
#   bash scripts/deps.sh --runtime  only what building and running didoedge needs
set -euo pipefail
cd "$(dirname "$0")/.."

mode=test
case "${1:-}" in
  --runtime) mode=runtime ;;
  "") ;;
  *) echo "usage: scripts/deps.sh [--runtime]" >&2; exit 2 ;;
esac

ORT_VERSION=1.24.1
ORT_TGZ_SHA256=57181cf6e6e711b155c5b942d591fd63ded0b5de5c4922d51fd994e7f6ac2772
ORT_X64_SHA256=53ef1ac028dd1b05554b8da28d9159eb3876f99868193d2aaa6e67f0243c23d4
ORT_ARM64_SHA256=7954e8bdedb497f830c6a679e818d98399b7f4d81ade1126c3e0be74d28111ab

# Building didoedge (cgo H.264 decoding) and fetching ONNX Runtime.
APT_PACKAGES=(libavcodec-dev libavutil-dev libswscale-dev pkg-config gcc ca-certificates)
# npm fetches the ONNX Runtime tarball; take Debian's only when none is on PATH.
command -v npm >/dev/null 2>&1 || APT_PACKAGES+=(npm)
# Real peers the tests start: ffmpeg/ffprobe, mosquitto, the ONNX checker, headless Chromium,
# systemd (cross/systemd_test.go runs the units under a private systemd; curl is the health check).
# PyTorch (auxue/nn/nnbench checks and times the training kernels against it).
if [ "$mode" = test ]; then
  APT_PACKAGES+=(ffmpeg mosquitto mosquitto-clients openssl python3-onnx python3-torch chromium systemd curl)
  # kubectl parses deploy/ offline (deploy/deploy_test.go): Debian's kubernetes-client
  # (1.20.2 in bookworm), unless a kubectl is already on PATH (another package's
  # /usr/bin/kubectl would conflict with it).
  command -v kubectl >/dev/null 2>&1 || APT_PACKAGES+=(kubernetes-client)
fi

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing Debian packages: ${missing[*]}"
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ONNX Runtime: the binding (onnxruntime_go v1.27.0) needs ORT >= 1.24.1.
dest=third_party/onnxruntime/$ORT_VERSION
check() { [ -f "$1" ] && echo "$2  $1" | sha256sum -c --status; }
if ! check "$dest/linux-x64/libonnxruntime.so.1" "$ORT_X64_SHA256" || ! check "$dest/linux-arm64/libonnxruntime.so.1" "$ORT_ARM64_SHA256"; then
  echo "deps: fetching ONNX Runtime $ORT_VERSION (npm pack onnxruntime-node@$ORT_VERSION)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "onnxruntime-node@$ORT_VERSION" >/dev/null)
  echo "$ORT_TGZ_SHA256  $tmp/onnxruntime-node-$ORT_VERSION.tgz" | sha256sum -c --status \
    || { echo "deps: onnxruntime-node tarball sha256 mismatch" >&2; exit 1; }
  tar -xzf "$tmp/onnxruntime-node-$ORT_VERSION.tgz" -C "$tmp" \
    package/bin/napi-v6/linux/x64/libonnxruntime.so.1 package/bin/napi-v6/linux/arm64/libonnxruntime.so.1
  mkdir -p "$dest/linux-x64" "$dest/linux-arm64"
  cp "$tmp/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$dest/linux-x64/"
  cp "$tmp/package/bin/napi-v6/linux/arm64/libonnxruntime.so.1" "$dest/linux-arm64/"
  check "$dest/linux-x64/libonnxruntime.so.1" "$ORT_X64_SHA256" || { echo "deps: x64 library sha256 mismatch" >&2; exit 1; }
  check "$dest/linux-arm64/libonnxruntime.so.1" "$ORT_ARM64_SHA256" || { echo "deps: arm64 library sha256 mismatch" >&2; exit 1; }
fi
# Foxglove's MCAP reader (@mcap/core 2.2.2, @mcap/support, @foxglove/schemas), the independent
# reader of the recording tests (internal/mcapcheck): exactly the lock file's versions.
if [ "$mode" = test ]; then
  mc=internal/mcapcheck/testdata/node
  if ! cmp -s "$mc/package-lock.json" "$mc/node_modules/.didoedge-lock"; then
    echo "deps: installing the MCAP test reader (npm ci in $mc)"
    (cd "$mc" && npm ci --ignore-scripts --no-audit --no-fund --silent)
    cp "$mc/package-lock.json" "$mc/node_modules/.didoedge-lock"
  fi
fi
echo "deps: ok (ONNX Runtime $ORT_VERSION in $dest)"
