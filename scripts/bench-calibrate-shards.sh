#!/usr/bin/env bash
# Sharded calibration speed (docs/fleet.md#speed): N recordings' data sets
# calibrated by one process, then by k = 1 and k = 2 shard processes at once
# plus the merge, each process with one ONNX Runtime thread (a pod with
# cpu: 1, as cross/deploy/calibrate asks). Checks the goal
#   wall(k shards at once) <= 1.2 * single / k   (the merge is timed apart)
# Run it alone on the machine (flock /tmp/didoedge-heavy.lock here).
# Usage: scripts/bench-calibrate-shards.sh [N data sets] [frames each]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-4}
FRAMES=${2:-24}
work=$(mktemp -d)
log=$work/log
trap 'rc=$?; [ $rc = 0 ] || tail -n 30 "$log" >&2; rm -rf "$work"' EXIT
go build -o "$work/didoedge" ./cmd/didoedge
bin=$work/didoedge
data=()
for i in $(seq 1 "$N"); do
  "$bin" sim render --world outdoor --frames "$FRAMES" --drives 2 --seed "$i" --workers 2 --out "$work/rec-$i" >>"$log" 2>&1
  data+=(--data "$work/rec-$i")
done
models=$PWD/models
cat >"$work/calibrate.yaml" <<CONF
camera: {url: "rtsp://127.0.0.1:1/unused"}
inference: {providers: [{name: cpu}], intra_op_threads: 1}
depth: {model: $models/depth.onnx, io_spec: $models/depth.yaml}
auxue: {model: $models/auxue.onnx, io_spec: $models/auxue.yaml}
alerts:
  vehicle: fleet
  camera: front
  grid: {rows: 2, cols: 2}
  mqtt: {broker: embedded, client_id: calibrate}
  outbox: {dir: $work/outbox}
  embedded: {allow_anonymous: true}
http: {listen: "off"}
CONF
common=(--config "$work/calibrate.yaml" --split all "${data[@]}")
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
# the thresholds: everything above meta: (meta names the run)
thresholds() { sed '/^meta:/,$d' "$1"; }
t0=$(now); "$bin" calibrate "${common[@]}" --out "$work/single.yaml" >"$log" 2>&1; t1=$(now)
single=$(secs "$t0" "$t1")
declare -A wall merge
for k in 1 2; do
  mkdir -p "$work/s$k"
  t0=$(now)
  pids=()
  for i in $(seq 0 $((k - 1))); do
    "$bin" calibrate shard "${common[@]}" --index "$i" --count "$k" --out "$work/s$k/shard-{index}.json" >>"$log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  t1=$(now)
  "$bin" calibrate merge --out "$work/merged-$k.yaml" "$work/s$k" >>"$log" 2>&1
  t2=$(now)
  wall[$k]=$(secs "$t0" "$t1")
  merge[$k]=$(secs "$t1" "$t2")
  if ! diff <(thresholds "$work/single.yaml") <(thresholds "$work/merged-$k.yaml"); then
    echo "k=$k: the merged thresholds differ from the single run's" >&2
    exit 1
  fi
done
frames=$(grep -o 'frames: "[0-9]*"' "$work/single.yaml" | grep -o '[0-9]*' || true)
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; $N data sets x $FRAMES frames (640x192), frames calibrated: ${frames:-?}"
printf '%-28s %8s %8s %10s %8s\n' run wall_s merge_s goal_s ok
printf '%-28s %8.2f %8s %10s %8s\n' "single process" "$single" - - -
fail=0
for k in 1 2; do
  goal=$(awk -v s="$single" -v k="$k" 'BEGIN { printf "%.3f", 1.2 * s / k }')
  ok=$(awk -v w="${wall[$k]}" -v g="$goal" 'BEGIN { print (w <= g) ? 1 : 0 }')
  [ "$ok" = 1 ] || fail=1
  printf '%-28s %8.2f %8.2f %10.2f %8s\n' "k=$k shards at once" "${wall[$k]}" "${merge[$k]}" "$goal" "$([ "$ok" = 1 ] && echo yes || echo NO)"
done
exit $fail
