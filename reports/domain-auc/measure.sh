#!/bin/bash
set -e
B=/tmp/sd/didoedge
D=/tmp/sd/data
SETS="--set indoor=$D/indoor --set newcam=$D/newcam --set newcam_360x640=$D/newcam-360 --set photos=/work/data-real/photos"
for c in $(ls $D/c); do SETS="$SETS --set c3_$c=$D/c/$c"; done
$B model domain --models /work/wt-stranger-data/models --test $D/outdoor-test $SETS > /tmp/sd/auc-reference.json 2>/tmp/sd/auc-reference.log
$B model domain --depth /tmp/sd/foreign/negdisp.onnx --depth-spec /tmp/sd/foreign/negdisp.yaml --auxue /tmp/sd/foreign-aux/auxue.onnx --auxue-spec /tmp/sd/foreign-aux/auxue.yaml --test $D/outdoor-test $SETS > /tmp/sd/auc-foreign.json 2>/tmp/sd/auc-foreign.log
echo done
