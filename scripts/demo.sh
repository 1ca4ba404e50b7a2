#!/usr/bin/env bash
# The README's main command: installs what building and running didoedge needs
# (libavcodec headers, the pinned ONNX Runtime), then runs the demo on embedded
# defaults: simulated RTSP camera, embedded MQTT broker, bundled reference models.
# Extra arguments go to `didoedge demo` (for example --duration 60s or --http 127.0.0.1:9090).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh --runtime
export ONNXRUNTIME_LIB="${ONNXRUNTIME_LIB:-$PWD/third_party/onnxruntime/1.29.0/linux-$(uname -m | sed 's/x86_64/x64/;s/aarch64/arm64/')/libonnxruntime.so.1}"
exec go run ./cmd/didoedge demo "$@"
