#!/usr/bin/env bash
# Prepares, on the build machine, everything the GPU device check (cross/gpu-check.sh) needs
# and cuts it into chunks that fit the device tool's 64 MiB per call (docs/deploy.md, "GPU
# check on a lent device"):
#
#   out/gpu-payload/   bin/didoedge (built with -tags nolibav: no libavcodec on the device; the
#                      benchmarks' simulated cameras are M-JPEG, decoded in Go), bin/infer.test
#                      (runtime/infer's tests), ort/ (ONNX Runtime 1.29.0 GPU build: core,
#                      providers_shared, providers_cuda), models-large/ (the large depth model
#                      and its AuxUE, below), SHA256SUMS
#   out/gpu-xfer/      chunk-00 .. chunk-NN (<= CHUNK_MIB MiB each) of payload.tar.gz, and MANIFEST
#                      (sha256 of every chunk and of the whole archive)
#
# The large model: the reference depth network (offline/depthnet) at 384x1280 with 3x the channels,
# untrained but deterministic (seeded weights; `didoedge train depth --untrained`), 28.5 GFLOP
# per frame (convolutions; the size class of Depth Anything S), and an AuxUE trained for one
# epoch on 2 simulated frames of it (its weights do not matter for timing, its size does).
#
#   bash cross/gpu-pack.sh            build everything and print the device calls
#   CHUNK_MIB=40 bash cross/gpu-pack.sh
set -euo pipefail
cd "$(dirname "$0")/.."

CHUNK_MIB=${CHUNK_MIB:-45}
ORT_VERSION=1.29.0
G=third_party/onnxruntime/$ORT_VERSION-gpu/linux-x64
CPU_LIB=$PWD/third_party/onnxruntime/$ORT_VERSION/linux-x64/libonnxruntime.so.1
P=out/gpu-payload
X=out/gpu-xfer

bash scripts/deps.sh --runtime --gpu
rm -rf "$P" "$X"
mkdir -p "$P/bin" "$P/ort" "$P/models-large" "$X"

echo "gpu-pack: building didoedge and runtime/infer's test binary (-tags nolibav)"
go build -tags nolibav -trimpath -o "$P/bin/didoedge" ./cmd/didoedge
go test -c -tags nolibav -trimpath -o "$P/bin/infer.test" ./runtime/infer
cp "$G/libonnxruntime.so.1" "$G/libonnxruntime_providers_shared.so" "$G/libonnxruntime_providers_cuda.so" "$P/ort/"

echo "gpu-pack: exporting the large model pair (384x1280)"
L=$P/models-large
depth_cmd="didoedge train depth --untrained --height 384 --export-width 1280 --width-mult 3 --seed 1 --out DIR"
# The recipe flags pin the benchmark AuxUE of the figures in docs/ (issue 32 changed train auxue's defaults).
aux_recipe="--lr 2e-3 --global-context=false --global-context-bands 0 --outliers 0 --model-features off"
aux_cmd="didoedge train auxue --depth DIR/depth.onnx --width 1280 --height 384 --frames 2 --val-frames 1 --epochs 1 $aux_recipe --seed 1 --out DIR --cache-dir ''"
ONNXRUNTIME_LIB=$CPU_LIB GOMAXPROCS=2 "$P/bin/didoedge" train depth --untrained --height 384 --export-width 1280 --width-mult 3 --seed 1 \
  --out "$L" --checkpoint "$X/tmp/depth.ckpt" --summary "$X/tmp/depth.json" >/dev/null
ONNXRUNTIME_LIB=$CPU_LIB GOMAXPROCS=2 "$P/bin/didoedge" train auxue --depth "$L/depth.onnx" --width 1280 --height 384 --frames 2 \
  --val-frames 1 --epochs 1 $aux_recipe --seed 1 --out "$L" --checkpoint "$X/tmp/auxue.ckpt" --cache-dir "" --summary "$X/tmp/auxue.json" \
  --progress=false >/dev/null
rm -rf "$X/tmp"
{
  echo "# The large GPU benchmark pair, made by cross/gpu-pack.sh (not committed: regenerate it)."
  for f in depth.onnx depth.yaml auxue.onnx auxue.yaml; do
    cmd=$depth_cmd
    case $f in auxue.*) cmd=$aux_cmd ;; esac
    printf '\nfile: %s\nsha256: %s\ncommand: %s\n' "$f" "$(sha256sum "$L/$f" | cut -d' ' -f1)" "$cmd"
  done
} > "$L/MANIFEST"

(cd "$P" && find . -type f ! -name SHA256SUMS | sort | xargs sha256sum > SHA256SUMS)
echo "gpu-pack: archiving and cutting into $CHUNK_MIB MiB chunks"
tar -C out -cf - gpu-payload | gzip -6 > "$X/payload.tar.gz"
split -b "${CHUNK_MIB}M" -d -a 2 "$X/payload.tar.gz" "$X/chunk-"
{
  echo "payload $(sha256sum "$X/payload.tar.gz" | cut -d' ' -f1) $(stat -c %s "$X/payload.tar.gz")"
  for c in "$X"/chunk-*; do echo "chunk $(basename "$c") $(sha256sum "$c" | cut -d' ' -f1) $(stat -c %s "$c")"; done
} > "$X/MANIFEST"
rm "$X/payload.tar.gz"
n=$(ls "$X"/chunk-* | wc -l)
tree=$(git ls-files -z | xargs -0 stat -c %s | awk '{s += $1} END {print s}')
echo "gpu-pack: $n chunks in $X (working tree $((tree / 1048576)) MiB + one chunk per device call, limit 64 MiB)"
echo "device calls, back to back while the machine is warm (one at a time; the last runs the check):"
chunks=("$X"/chunk-*)
last=${chunks[${#chunks[@]}-1]}
for c in "${chunks[@]}"; do
  [ "$c" = "$last" ] && break
  echo "  run command='bash cross/gpu-check.sh receive' carry=[\"$X/MANIFEST\",\"$c\"]"
done
echo "  run command='bash cross/gpu-check.sh run' carry=[\"$X/MANIFEST\",\"$last\"] timeout_s=560"
