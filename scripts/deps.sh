#!/usr/bin/env bash
# Installs what the tests and the demo need on a fresh Debian machine:
# Debian packages (libavcodec for the build; ffmpeg, mosquitto, python3-onnx,
# python3-torch, chromium for the tests) and the pinned ONNX Runtime libraries (x64 and arm64)
# under third_party/onnxruntime/. Idempotent: a second run only checks.
#
#   bash scripts/deps.sh            everything the tests need
#   bash scripts/deps.sh --runtime  only what building and running didoedge needs
#   bash scripts/deps.sh --gpu      also ONNX Runtime's x64 GPU build (CUDA 13, TensorRT 10 providers:
#                                   two npm packages, 330 MB download, 260 MB on disk) into
#                                   third_party/onnxruntime/$ORT_VERSION-gpu/ (docs/deploy.md)
set -euo pipefail
cd "$(dirname "$0")/.."

mode=test
gpu=0
for arg in "$@"; do
  case "$arg" in
    --runtime) mode=runtime ;;
    --gpu) gpu=1 ;;
    *) echo "usage: scripts/deps.sh [--runtime] [--gpu]" >&2; exit 2 ;;
  esac
done

# CPU builds: npm's onnxruntime-node (Microsoft's). x64: 1.29.0, the version of
# the GPU build. arm64: 1.24.1, because 1.29.0's arm64 library dies with a null
# pointer while it loads under qemu-user (7.2, every -cpu model tried), so the
# arm64 smoke test (offline/modeltool-qemu.sh) could not check it; 1.24.1 loads there
# and gives the amd64 maps. runtime/infer.BundledVersion names both.
ORT_VERSION=1.29.0
VERSITYGW_VERSION=v1.8.0
ORT_TGZ_SHA256=cfdfb45ec4044b1fdca43e5d2e180fb6817e649ff8ad1e0dfc90e18e51b67037
ORT_X64_SHA256=89688f5cf51c7e31befbb7b9101bc027799009b18d1baa9a5b1146a72e69538d
ORT_ARM64_VERSION=1.24.1
ORT_ARM64_TGZ_SHA256=57181cf6e6e711b155c5b942d591fd63ded0b5de5c4922d51fd994e7f6ac2772
ORT_ARM64_SHA256=7954e8bdedb497f830c6a679e818d98399b7f4d81ade1126c3e0be74d28111ab
# GPU build (x64): Microsoft's ONNX Runtime 1.29.0 GPU release repackaged for Unity (MIT,
# github.com/asus4/onnxruntime-unity): the core with the CUDA/TensorRT provider bridge, and the
# provider libraries, which ONNX Runtime loads from beside the core.
ORT_GPU_CORE_PKG=com.github.asus4.onnxruntime@0.4.9
ORT_GPU_CORE_TGZ_SHA256=e59788788818fdde1b2e522e766a21ba0f7d8391de55737abf81e32cc801785d
ORT_GPU_PROV_PKG=com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9
ORT_GPU_PROV_TGZ_SHA256=2b459e0c17f340c92970c10ed86de4f37a3009f93c14053e6ad4334cbb6be412
# file in the GPU directory, its sha256
ORT_GPU_FILES=(
  "libonnxruntime.so.1 5715f06d8992ca8eeeddcce43df3a7d38f97d537052126f558e912cb312460ca"
  "libonnxruntime_providers_shared.so c6a12593396095f5670160e284c35d1700b7708cf3037b7042e2a5200ccae772"
  "libonnxruntime_providers_cuda.so 56cf3254b118ad837ccc4ed8f6d1b23504bbf7ef91b34cbc0b289cb7f10b3037"
  "libonnxruntime_providers_tensorrt.so ef6071798a339038ad66c428fb1a809cf8e499bffc3b6870e4e8bc4f4c6a6320"
  "include/onnxruntime_c_api.h acc0cf4b3f28d39339c76770d76164bb7a0637dc89f5fde764b4017b632f6743"
)

# Building didoedge (cgo H.264 decoding) and fetching ONNX Runtime.
APT_PACKAGES=(libavcodec-dev libavutil-dev libswscale-dev pkg-config gcc ca-certificates)
# npm fetches the ONNX Runtime tarball; take Debian's only when none is on PATH.
command -v npm >/dev/null 2>&1 || APT_PACKAGES+=(npm)
# Real peers the tests start: ffmpeg/ffprobe, mosquitto, the ONNX checker, headless Chromium,
# systemd (cross/systemd_test.go runs the units under a private systemd; curl is the health check).
# PyTorch (pkg/nn/nnbench checks and times the training kernels against it).
if [ "$mode" = test ]; then
  APT_PACKAGES+=(ffmpeg mosquitto mosquitto-clients openssl python3-onnx python3-torch chromium systemd curl)
  # kubectl parses cross/deploy/ offline (cross/deploy/deploy_test.go): Debian's kubernetes-client
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
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# npm_pack PKG SHA256 writes the package's tarball into $tmp and checks it (no install, no scripts).
npm_pack() {
  local name
  name=$(cd "$tmp" && npm pack --silent "$1" | tail -n 1)
  echo "$2  $tmp/$name" | sha256sum -c --status || { echo "deps: $1 tarball sha256 mismatch" >&2; exit 1; }
  echo "$tmp/$name"
}
if ! check "$dest/linux-x64/libonnxruntime.so.1" "$ORT_X64_SHA256"; then
  echo "deps: fetching ONNX Runtime $ORT_VERSION x64 (npm pack onnxruntime-node@$ORT_VERSION)"
  tgz=$(npm_pack "onnxruntime-node@$ORT_VERSION" "$ORT_TGZ_SHA256")
  tar -xzf "$tgz" -C "$tmp" package/bin/napi-v6/linux/x64/libonnxruntime.so.1
  mkdir -p "$dest/linux-x64"
  cp "$tmp/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$dest/linux-x64/"
  check "$dest/linux-x64/libonnxruntime.so.1" "$ORT_X64_SHA256" || { echo "deps: x64 library sha256 mismatch" >&2; exit 1; }
fi
adest=third_party/onnxruntime/$ORT_ARM64_VERSION/linux-arm64
if ! check "$adest/libonnxruntime.so.1" "$ORT_ARM64_SHA256"; then
  echo "deps: fetching ONNX Runtime $ORT_ARM64_VERSION arm64 (npm pack onnxruntime-node@$ORT_ARM64_VERSION)"
  tgz=$(npm_pack "onnxruntime-node@$ORT_ARM64_VERSION" "$ORT_ARM64_TGZ_SHA256")
  tar -xzf "$tgz" -C "$tmp" package/bin/napi-v6/linux/arm64/libonnxruntime.so.1
  mkdir -p "$adest"
  cp "$tmp/package/bin/napi-v6/linux/arm64/libonnxruntime.so.1" "$adest/"
  check "$adest/libonnxruntime.so.1" "$ORT_ARM64_SHA256" || { echo "deps: arm64 library sha256 mismatch" >&2; exit 1; }
fi
# The GPU build, only when asked (--gpu): 330 MB of downloads that CPU machines never need.
gdest=third_party/onnxruntime/$ORT_VERSION-gpu/linux-x64
gpu_ok() {
  local entry
  for entry in "${ORT_GPU_FILES[@]}"; do
    set -- $entry
    check "$gdest/$1" "$2" || return 1
  done
}
if [ "$gpu" = 1 ] && ! gpu_ok; then
  echo "deps: fetching ONNX Runtime $ORT_VERSION GPU build (npm pack $ORT_GPU_CORE_PKG $ORT_GPU_PROV_PKG, 330 MB)"
  core=$(npm_pack "$ORT_GPU_CORE_PKG" "$ORT_GPU_CORE_TGZ_SHA256")
  prov=$(npm_pack "$ORT_GPU_PROV_PKG" "$ORT_GPU_PROV_TGZ_SHA256")
  hdr='package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64/onnxruntime.framework/Headers'
  mkdir -p "$tmp/core" "$tmp/prov"
  tar -xzf "$core" -C "$tmp/core" package/Plugins/Linux/x64/libonnxruntime.so package/LICENSE package/ThirdPartyNotices.txt "$hdr"
  tar -xzf "$prov" -C "$tmp/prov" package/Plugins/Linux/x64
  mkdir -p "$gdest/include"
  cp "$tmp/core/package/Plugins/Linux/x64/libonnxruntime.so" "$gdest/libonnxruntime.so.1"
  cp "$tmp/prov/package/Plugins/Linux/x64/"libonnxruntime_providers_{shared,cuda,tensorrt}.so "$gdest/"
  cp "$tmp/core/$hdr/"*.h "$gdest/include/"
  cp "$tmp/core/package/LICENSE" "$tmp/core/package/ThirdPartyNotices.txt" "$gdest/"
  gpu_ok || { echo "deps: GPU build sha256 mismatch in $gdest" >&2; exit 1; }
fi
# Foxglove's MCAP reader (@mcap/core 2.2.2, @mcap/support, @foxglove/schemas), the independent
# reader of the recording tests (internal/mcapcheck), and Foxglove's WebSocket client
# (@foxglove/ws-protocol 0.8.0, @foxglove/schemas), the live view's (runtime/apps/live):
# exactly the lock files' versions.
if [ "$mode" = test ]; then
  for mc in internal/mcapcheck/testdata/node runtime/apps/live/testdata/node; do
    if ! cmp -s "$mc/package-lock.json" "$mc/node_modules/.didoedge-lock"; then
      echo "deps: installing a Node test peer (npm ci in $mc)"
      (cd "$mc" && npm ci --ignore-scripts --no-audit --no-fund --silent)
      cp "$mc/package-lock.json" "$mc/node_modules/.didoedge-lock"
    fi
  done
  # The S3-compatible server the object-storage tests start (Versity
  # Gateway, Apache-2.0, posix backend), built from the Go module proxy:
  # about 3 minutes on 2 cores the first time (internal/objstore/s3test).
  vgw=third_party/versitygw/$VERSITYGW_VERSION
  if [ ! -x "$vgw/versitygw" ] || [ "$(cat "$vgw/VERSION" 2>/dev/null)" != "$VERSITYGW_VERSION" ]; then
    echo "deps: building Versity Gateway $VERSITYGW_VERSION (go install, a few minutes)"
    mkdir -p "$vgw"
    GOBIN="$PWD/$vgw" GOFLAGS=-mod=mod go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
    echo "$VERSITYGW_VERSION" > "$vgw/VERSION"
  fi
fi
if [ "$gpu" = 1 ]; then
  echo "deps: ok (ONNX Runtime $ORT_VERSION in $dest, GPU build in $gdest)"
else
  echo "deps: ok (ONNX Runtime $ORT_VERSION in $dest)"
fi
