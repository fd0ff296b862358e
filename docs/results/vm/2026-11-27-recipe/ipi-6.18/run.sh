#!/bin/bash
# Run from the repository root (binary a58784a); 2026-11-27 20:58-21:02 UTC, nothing else measured or built meanwhile.
B=target/release/preemptlab
D=docs/results/vm/2026-11-27-recipe/ipi-6.18
for r in 1 2 3; do for m in none lazy; do
  $B vm --kernel 6.18 --preempt $m -- bench lock --locks pg,futex --pages 4k --workers 4x --duration 3s --warmup 1s --repeat 1 --out $D/ipi-$m-r$r.json > $D/ipi-$m-r$r.txt 2> $D/ipi-$m-r$r.err
  echo "$m r$r rc=$?" >> $D/progress
done; done
