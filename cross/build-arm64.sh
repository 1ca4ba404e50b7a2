#!/usr/bin/env bash
# Cross-builds didoedge for linux/arm64 (Jetson Orin, other aarch64 boards)
# with cgo, on a Debian 12 amd64 machine, into bin/linux-arm64/didoedge.
#
# cgo is needed twice: onnxruntime_go loads libonnxruntime with dlopen (libc
# only), and camera/h264 links libavcodec/libavutil/libswscale through
# pkg-config. The arm64 libraries come from Debian multiarch
# (dpkg --add-architecture arm64); pkg-config is pointed at their .pc files.
#
# Installs what it needs (idempotent; sudo only when not root):
#   gcc-aarch64-linux-gnu libc6-dev-arm64-cross pkg-config file
#   libavcodec-dev:arm64 libavutil-dev:arm64 libswscale-dev:arm64
# Set DIDOEDGE_SKIP_APT=1 to skip the package step (packages pre-installed).
#
# Usage: bash cross/build-arm64.sh [extra go build flags...]
set -euo pipefail
cd "$(dirname "$0")/.."

TRIPLET=aarch64-linux-gnu
OUT=bin/linux-arm64/didoedge
HOST_PACKAGES=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross pkg-config file)
ARM64_PACKAGES=(libavcodec-dev:arm64 libavutil-dev:arm64 libswscale-dev:arm64)

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
apt_install() {
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if [ "${DIDOEDGE_SKIP_APT:-0}" != 1 ]; then
  updated=0
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    echo "build-arm64: enabling the arm64 multiarch architecture"
    sudo_if_needed dpkg --add-architecture arm64
    # Only the arm64 package lists are new: an update is required.
    sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    updated=1
  fi
  missing=()
  for p in "${HOST_PACKAGES[@]}" "${ARM64_PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "build-arm64: installing ${missing[*]}"
    [ "$updated" = 1 ] || sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    # Multi-Arch: same packages (libavcodec59 and friends) must have the same
    # version on amd64 and arm64; if the amd64 ones are older than the
    # archive, this upgrades them together.
    apt_install "${missing[@]}"
  fi
fi

export CGO_ENABLED=1 GOOS=linux GOARCH=arm64 CC=$TRIPLET-gcc
# pkg-config must see only the arm64 .pc files, never the host's.
export PKG_CONFIG_LIBDIR=/usr/lib/$TRIPLET/pkgconfig:/usr/share/pkgconfig
export PKG_CONFIG_PATH=
# The linker resolves libavcodec's own dependencies (libx264, libdav1d, ...)
# from the multiarch directories.
export CGO_LDFLAGS="${CGO_LDFLAGS:-} -Wl,-rpath-link=/usr/lib/$TRIPLET:/lib/$TRIPLET"

if ! pkg-config --exists libavcodec libavutil libswscale; then
  echo "build-arm64: pkg-config cannot find arm64 libavcodec/libavutil/libswscale in $PKG_CONFIG_LIBDIR" >&2
  echo "build-arm64: install ${ARM64_PACKAGES[*]} (multiarch) or run without DIDOEDGE_SKIP_APT=1" >&2
  exit 1
fi

version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
mkdir -p "$(dirname "$OUT")"
echo "build-arm64: go build ($(go version | awk '{print $3}'), CC=$CC, libavcodec $(pkg-config --modversion libavcodec) arm64)"
go build -trimpath -ldflags "-X main.version=$version" -o "$OUT" "$@" ./cmd/didoedge

# The M-JPEG-only variant links no FFmpeg library, for systems whose libavcodec
# soname differs from Debian 12's (JetPack 6 has FFmpeg 4.4); docs/deploy.md.
NOLIBAV_OUT=bin/linux-arm64-nolibav/didoedge
mkdir -p "$(dirname "$NOLIBAV_OUT")"
go build -trimpath -tags nolibav -ldflags "-X main.version=$version" -o "$NOLIBAV_OUT" "$@" ./cmd/didoedge
if readelf -d "$NOLIBAV_OUT" | grep -q 'libav'; then
  echo "build-arm64: $NOLIBAV_OUT links libav* despite -tags nolibav" >&2; exit 1
fi
echo "build-arm64: $NOLIBAV_OUT: $(file -b "$NOLIBAV_OUT" | cut -d, -f1-2) (M-JPEG only)"

desc=$(file -b "$OUT")
echo "build-arm64: $OUT: $desc"
case "$desc" in
  *"ELF 64-bit LSB"*"ARM aarch64"*) ;;
  *) echo "build-arm64: $OUT is not an arm64 ELF executable" >&2; exit 1 ;;
esac
