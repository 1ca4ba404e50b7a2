#!/usr/bin/env bash
# Live view figures (docs/live.md): `didoedge demo` (reference models, the
# simulated RTSP camera at FPS) with the live view on; the pipeline's frame
# rate from /metrics over WINDOW seconds with no client, then with CLIENTS
# Foxglove clients (live.cjs) subscribed to every channel, alternating
# ROUNDS times; frame -> client latency (capture time to the client's
# receipt of the image message) from the clients.
#   bash runtime/apps/live/testdata/measure.sh BINARY [FPS] [CLIENTS] [WINDOW] [ROUNDS]
set -euo pipefail
bin=$1 fps=${2:-15} clients=${3:-4} window=${4:-20} rounds=${5:-2}
node_dir=$(cd "$(dirname "$0")/node" && pwd)
http=127.0.0.1:18080 ws=127.0.0.1:18765
"$bin" demo --fps "$fps" --http "$http" --foxglove "$ws" --broker 127.0.0.1:18831 --zones-every 0 >/tmp/live-measure-demo.log 2>&1 &
demo=$!
trap 'kill $demo 2>/dev/null; wait $demo 2>/dev/null || true' EXIT
frames() { curl -s "http://$http/metrics" | awk '/^didoedge_frames_total/ {s += $2} END {print s+0}'; }
for _ in $(seq 120); do [ "$(frames)" -gt 30 ] 2>/dev/null && break; sleep 1; done
sleep 10 # warm-up
for r in $(seq "$rounds"); do
  a=$(frames); sleep "$window"; b=$(frames)
  echo "round $r: 0 clients: $(echo "($b - $a) / $window" | bc -l | cut -c1-6) fps"
  pids=()
  for c in $(seq "$clients"); do
    (cd "$node_dir" && node live.cjs "ws://$ws/" --seconds $((window + 4)) > "/tmp/live-measure-$c.json") &
    pids+=($!)
  done
  sleep 2; a=$(frames); sleep "$window"; b=$(frames)
  wait "${pids[@]}"
  echo "round $r: $clients clients: $(echo "($b - $a) / $window" | bc -l | cut -c1-6) fps"
  for c in $(seq "$clients"); do
    node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1])); const l=r.latencyMs["/front/image"]||{};
      console.log(`  client ${process.argv[2]}: ${r.counts["/front/image"]||0} images, latency p50 ${(l.p50||0).toFixed(1)} ms p95 ${(l.p95||0).toFixed(1)} ms max ${(l.max||0).toFixed(1)} ms; errors ${r.errors.length}`)' "/tmp/live-measure-$c.json" "$c"
  done
done
curl -s "http://$http/metrics" | grep -E '^didoedge_live_(messages|frames)' || true
