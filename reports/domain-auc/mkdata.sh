#!/bin/bash
set -e
B=${DIDOEDGE:-didoedge}
D=${DATA:-/tmp/sd/data}
$B sim render --world outdoor --frames 60 --drives 6 --stride 10 --size 192x640 --seed 5005 --workers 1 --out $D/outdoor-test
$B sim render --world indoor --frames 60 --drives 3 --stride 20 --size 192x640 --seed 6006 --workers 1 --out $D/indoor
$B sim render --world outdoor --camera newcam --frames 60 --drives 6 --stride 10 --size 192x640 --seed 5005 --workers 1 --out $D/newcam
$B sim render --world outdoor --camera newcam --frames 60 --drives 6 --stride 10 --seed 5005 --workers 1 --out $D/newcam-360
for t in $($B sim corrupt --help 2>&1 | grep -o 'one of: .*' | sed 's/one of: //; s/,//g; s/"//g' | head -1); do
  $B sim corrupt --in $D/outdoor-test --out $D/c/$t --type $t --severity 3 --workers 1
done
echo done
