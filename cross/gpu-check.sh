#!/usr/bin/env bash
# The GPU device check (docs/deploy.md, "GPU check on a lent device"): reassembles the payload
# that cross/gpu-pack.sh cut into chunks, finds the CUDA 13 libraries (inside PyTorch's NVIDIA
# wheels on the device machines), runs runtime/infer's GPU tests, and `didoedge bench latency`
# and `bench multicam --cameras 1,4,8` on the reference models and on the large model, with the
# CUDA provider (required: no silent CPU fallback) and the same machine's CPU provider in the
# same run as the baseline (the same ONNX Runtime 1.29.0 GPU build serves both). It ends with
# the table of figures (cross/gpu-table.py).
#
#   bash cross/gpu-check.sh receive     device: keep the chunks this call carried (out/gpu-xfer/)
#                                       in $STAGE, checking each against MANIFEST
#   bash cross/gpu-check.sh run         device: keep the chunk this call carried, if any, then
#                                       reassemble, check, run everything
#   bash cross/gpu-check.sh --cpu-only  build machine: the whole script on the CPU (reassembly from
#                                       out/gpu-xfer/, the CUDA library search, the GPU tests, which
#                                       skip, and the benchmarks with the CPU provider alone, short)
#
# Environment: STAGE (default /tmp/didoedge-gpu), OUT (results; the device tool's $OUT, else
# out/gpu-check), DURATION and WARMUP of each benchmark run (default 10s and 3s).
set -uo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
X=out/gpu-xfer
STAGE=${STAGE:-/tmp/didoedge-gpu}
OUT=${OUT:-out/gpu-check}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-3s}
cpu_only=0

die() { echo "gpu-check: $*" >&2; exit 1; }
[ -f "$X/MANIFEST" ] || die "$X/MANIFEST missing: run cross/gpu-pack.sh here and carry it with every call"

# check_chunk FILE: its sha256 and size match MANIFEST.
check_chunk() {
  local name sum size
  name=$(basename "$1")
  read -r sum size < <(awk -v n="$name" '$1 == "chunk" && $2 == n {print $3, $4}' "$X/MANIFEST")
  [ -n "${sum:-}" ] || return 1
  [ "$(stat -c %s "$1")" = "$size" ] && echo "$sum  $1" | sha256sum -c --status
}

receive() {
  mkdir -p "$STAGE/chunks"
  local c
  for c in "$X"/chunk-*; do
    [ -f "$c" ] || continue
    check_chunk "$c" || die "$c does not match $X/MANIFEST (damaged or from another gpu-pack run)"
    cp "$c" "$STAGE/chunks/"
    echo "gpu-check: received $(basename "$c")"
  done
  local missing=()
  for c in $(awk '$1 == "chunk" {print $2}' "$X/MANIFEST"); do
    check_chunk "$STAGE/chunks/$c" 2>/dev/null || missing+=("$c")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "gpu-check: still missing: ${missing[*]}"
  else
    echo "gpu-check: all chunks here; next: bash cross/gpu-check.sh run"
  fi
}

case "$mode" in
  receive) receive; exit 0 ;;
  run) receive ;; # the run call may carry the last chunk
  --cpu-only) cpu_only=1; STAGE=$(mktemp -d); trap 'rm -rf "$STAGE"' EXIT; DURATION=${DURATION_CPU:-4s}; WARMUP=${WARMUP_CPU:-2s} ;;
  *) die "usage: cross/gpu-check.sh receive|run|--cpu-only" ;;
esac

[ "$cpu_only" = 0 ] || receive
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
exec > >(tee "$OUT/gpu-check.log") 2>&1

# Reassemble and check the payload.
for c in $(awk '$1 == "chunk" {print $2}' "$X/MANIFEST"); do
  check_chunk "$STAGE/chunks/$c" || die "chunk $c missing or damaged in $STAGE/chunks: carry it with a receive call"
done
read -r psum psize < <(awk '$1 == "payload" {print $2, $3}' "$X/MANIFEST")
cat $(awk '$1 == "chunk" {print "'"$STAGE"'/chunks/" $2}' "$X/MANIFEST") > "$STAGE/payload.tar.gz"
echo "$psum  $STAGE/payload.tar.gz" | sha256sum -c --status || die "reassembled payload: sha256 mismatch"
rm -rf "$STAGE/gpu-payload"
tar -C "$STAGE" -xzf "$STAGE/payload.tar.gz" || die "extract the payload"
rm "$STAGE/payload.tar.gz"
P=$STAGE/gpu-payload
(cd "$P" && sha256sum -c --quiet SHA256SUMS) || die "payload files: sha256 mismatch"
echo "gpu-check: payload reassembled and checked ($psize bytes, sha256 $psum)"
ORT=$P/ort/libonnxruntime.so.1
BIN=$P/bin/didoedge

# The machine.
echo "== machine"
grep -m1 'model name' /proc/cpuinfo
echo "cores: $(nproc)"
card=none
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
fi
echo "card: ${card:-none}"
echo "$card" > "$OUT/card.txt"

# CUDA 13 libraries: on the device machines they live in PyTorch's NVIDIA wheels.
echo "== CUDA libraries"
libdirs=()
names=('libcublas.so.13*' 'libcublasLt.so.13*' 'libcudart.so.13*' 'libcurand.so.10*' 'libcudnn.so.9*' 'libcufft.so.12*')
expr=()
for so in "${names[@]}"; do expr+=(-o -name "$so"); done
# Python's site-packages first (PyTorch's NVIDIA wheels: fast), then the whole file system
# (one pass, bounded), as `find / -name 'libcublas.so.13*'` would.
roots=$(python3 -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null | while read -r d; do [ -d "$d/nvidia" ] && echo "$d/nvidia"; done)
hits=$( { [ -n "$roots" ] && find $roots \( "${expr[@]:1}" \) -print 2>/dev/null; } || true)
if [ "$(for so in "${names[@]:0:4}"; do echo "$hits" | grep -m1 "/${so%\*}" ; done | wc -l)" -lt 4 ]; then
  hits=$(timeout 180 find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o \( "${expr[@]:1}" \) -print 2>/dev/null)
fi
# Only real shared objects (ELF): an empty or stray file of the same name (a test's fake
# library in /tmp) would make the loader stop at "file too short".
hits=$(echo "$hits" | while read -r f; do [ -n "$f" ] && [ "$(head -c 4 "$f" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ] && echo "$f"; done)
for so in "${names[@]}"; do
  hit=$(echo "$hits" | grep -m1 "/${so%\*}" || true)
  if [ -n "$hit" ]; then
    echo "found $hit"
    d=$(dirname "$hit")
    [[ " ${libdirs[*]-} " == *" $d "* ]] || libdirs+=("$d")
  else
    echo "not found: $so"
  fi
done
if [ ${#libdirs[@]} -gt 0 ]; then
  export LD_LIBRARY_PATH="$(IFS=:; echo "${libdirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
echo "libonnxruntime_providers_cuda.so dependencies not found:"
ldd "$P/ort/libonnxruntime_providers_cuda.so" | grep 'not found' || echo "  (none)"

status=0
gpu=0
if [ "$card" != none ] && [ -n "$card" ] && [ "$cpu_only" = 0 ]; then gpu=1; fi

# runtime/infer's GPU tests, in the package directory (they read ../../models).
echo "== GPU tests (runtime/infer)"
(cd runtime/infer && ONNXRUNTIME_LIB=$ORT "$P/bin/infer.test" -test.run '^(TestCUDA|TestGPUBuild|TestSIGINT|TestDefaultBatchFollowsProvider|TestDevice)' -test.v -test.count=1) \
  > "$OUT/gpu-tests.txt" 2>&1
rc=$?
grep -E '^(=== RUN|--- |\s+\w+_test\.go|PASS|FAIL|ok)' "$OUT/gpu-tests.txt" | grep -v '=== RUN'
if [ $rc -ne 0 ]; then echo "gpu-check: GPU tests FAILED (rc $rc)"; status=1; fi
if [ "$gpu" = 1 ]; then
  for t in TestCUDAModelsMatchCPU TestCUDAFaultRebuildsOnCPU TestCUDADefaultBatch TestCUDADeviceTensors; do
    grep -q -- "--- PASS: $t " "$OUT/gpu-tests.txt" || { echo "gpu-check: $t did not pass on the GPU"; status=1; }
  done
else
  grep -q -- "no NVIDIA GPU" "$OUT/gpu-tests.txt" && echo "gpu-check: GPU tests skipped: no NVIDIA GPU (expected with --cpu-only)"
fi

# Benchmarks: reference models and the large model; CUDA (required) and the CPU provider.
# CUDA runs with device-resident tensors (inference.device_tensors auto: the image uploaded
# once, the depth model's outputs handed to the AuxUE on the device, only the maps copied
# back; the report's "host/device copies per frame" line), and once more with
# --device-tensors off (host tensors) for bench latency, tag <model>-cuda_off.
# The dry run (--cpu-only) runs bench latency once more with --device-tensors on: the same
# device-resident code path over host memory, so that its copy line and the table are checked.
providers=("cpu" "cpu/on")
[ "$gpu" = 1 ] && providers=("cuda:required" "cuda:required/off" "cpu")
models=("reference:models" "large:$P/models-large")
for mp in "${models[@]}"; do
  name=${mp%%:*}
  dir=${mp#*:}
  for pv in "${providers[@]}"; do
    prov=${pv%/*}
    dt=auto
    tag=$name-${prov%%:*}
    if [ "$pv" != "$prov" ]; then dt=${pv##*/}; tag=${tag}_$dt; fi
    echo "== bench latency: $name, $prov, device_tensors $dt"
    ONNXRUNTIME_LIB=$ORT "$BIN" bench latency --models "$dir" --providers "$prov" --device-tensors "$dt" --library "$ORT" \
      --duration "$DURATION" --warmup "$WARMUP" --precompute 8 > "$OUT/latency-$tag.txt" 2> "$OUT/latency-$tag.log"
    rc=$?
    cat "$OUT/latency-$tag.txt"
    grep -h 'device-resident tensors' "$OUT/latency-$tag.log" | head -n 2
    grep -h 'msg="model session"\|msg="ONNX Runtime loaded"\|level=WARN\|level=ERROR' "$OUT/latency-$tag.log" | head -n 8
    if [ $rc -ne 0 ]; then echo "gpu-check: bench latency $tag failed (rc $rc)"; tail -n 5 "$OUT/latency-$tag.log"; status=1; fi
    if [ "$gpu" = 1 ] && [ "$prov" = cuda:required ] && [ "$dt" = auto ] && ! grep -q 'host/device copies per frame (device-resident' "$OUT/latency-$tag.txt"; then
      echo "gpu-check: $tag: the device-resident path did not run on CUDA (see $OUT/latency-$tag.log)"; status=1
    fi
    [ "$dt" != auto ] && continue # the comparison: bench latency only
    echo "== bench multicam: $name, $prov"
    ONNXRUNTIME_LIB=$ORT "$BIN" bench multicam --models "$dir" --cameras 1,4,8 --dynamic-batch --providers "$prov" --library "$ORT" \
      --duration "$DURATION" --warmup "$WARMUP" --slices 2 --frames 4 > "$OUT/multicam-$tag.txt" 2> "$OUT/multicam-$tag.log"
    rc=$?
    cat "$OUT/multicam-$tag.txt"
    if [ $rc -ne 0 ]; then echo "gpu-check: bench multicam $tag failed (rc $rc)"; tail -n 5 "$OUT/multicam-$tag.log"; status=1; fi
  done
done

echo "== table"
python3 cross/gpu-table.py "$OUT" | tee "$OUT/table.md"
echo "gpu-check: status $status; results in $OUT"
exit $status
