#!/bin/bash
# Rescheduling interrupts around bench lock (futex, 4 KB, 8 workers, 3 s) in 6.18 guests booted none and
# lazy, 3 interleaved rounds (docs/notes/2026-11-27-vm-sets-on-the-tsc.md). Run from the repository root
# with a release build; virtme-ng directly, since `preemptlab vm` runs only preemptlab commands and this
# reads /proc/interrupts in the guest before and after (guest.sh). ipi.py tabulates.
export PATH=/var/cache/preemptlab/virtme-ng/bin:$PATH
V=/var/cache/preemptlab/virtme-ng/bin/vng
K=/var/cache/preemptlab/kernels/6.18.15+deb13-amd64/boot/vmlinuz-6.18.15+deb13-amd64
for r in 1 2 3; do
  for m in none lazy; do
    [ $r = 2 ] && m=$([ $m = none ] && echo lazy || echo none)
    timeout 600 $V --run $K --cpus 2 --memory 2048M --user root --rwdir "$PWD"/docs/results/vm/2026-11-27-tsc/ipi-futex --disable-kvm \
      --append "preempt=$m tsc=reliable" --exec "/bin/sh docs/results/vm/2026-11-27-tsc/ipi-futex/guest.sh $m $r" > docs/results/vm/2026-11-27-tsc/ipi-futex/$m-r$r.vng.log 2>&1
    echo "$m r$r rc=$?"
  done
done
