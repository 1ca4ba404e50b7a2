#!/bin/bash
# calibrate on every set with both model pairs; one line per run: pair set verdict
B=${DIDOEDGE:-didoedge}
D=${DATA:-/tmp/sd/data}
sets="outdoor-test=$D/outdoor-test indoor=$D/indoor newcam=$D/newcam newcam_360x640=$D/newcam-360 photos=${PHOTOS:-/work/data-real/photos}"
for c in $(ls $D/c); do sets="$sets c3_$c=$D/c/$c"; done
for pair in reference foreign; do
  if [ $pair = reference ]; then M="--depth ${MODELS_WITH_RECORD:-/tmp/sd/bench-models}/depth.onnx --auxue ${MODELS_WITH_RECORD:-/tmp/sd/bench-models}/auxue.onnx"
  else M="--depth ${FOREIGN:-/tmp/sd/foreign}/negdisp.onnx --auxue ${FOREIGN_AUX:-/tmp/sd/foreign-aux}/auxue.onnx"; fi
  for kv in $sets; do
    name=${kv%%=*}; dir=${kv#*=}
    out=$($B calibrate $M --data $dir --split all --out /tmp/sd/cal-tmp.yaml 2>&1 | grep -v "level=INFO\|level=WARN")
    if echo "$out" | grep -q "outside the AuxUE's training domain"; then v="refused: $(echo "$out" | grep -o '[0-9]* of [0-9]* frames ([0-9]*%)' | head -1) $(echo "$out" | grep -o 'move tau_[ea]' | sort -u | tr '\n' ' ')"
    elif echo "$out" | grep -q "domain check:"; then v="accepted: $(echo "$out" | grep -o 'domain check:.*')"
    else v="other: $(echo "$out" | tail -1 | cut -c1-300)"; fi
    echo "$pair $name $v"
  done
done
