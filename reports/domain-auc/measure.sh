#!/bin/bash
set -e
B=${DIDOEDGE:-didoedge}
D=${DATA:-/tmp/sd/data}
SETS="--set indoor=$D/indoor --set newcam=$D/newcam --set newcam_360x640=$D/newcam-360 --set photos=${PHOTOS:-/work/data-real/photos}"
for c in $(ls $D/c); do SETS="$SETS --set c3_$c=$D/c/$c"; done
$B model domain --models ${MODELS:-models} --test $D/outdoor-test $SETS > reports/domain-auc/reference.json
$B model domain --depth ${FOREIGN:-/tmp/sd/foreign}/negdisp.onnx --depth-spec ${FOREIGN:-/tmp/sd/foreign}/negdisp.yaml --auxue ${FOREIGN_AUX:-/tmp/sd/foreign-aux}/auxue.onnx --auxue-spec ${FOREIGN_AUX:-/tmp/sd/foreign-aux}/auxue.yaml --test $D/outdoor-test $SETS > reports/domain-auc/foreign.json
echo done
