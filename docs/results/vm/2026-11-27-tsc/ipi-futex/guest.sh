#!/bin/sh
# in the guest: RES and CAL interrupt counts around one bench lock run
M=$1; R=$2; D=docs/results/vm/2026-11-27-tsc/ipi-futex
cat /proc/cmdline > $D/$M-r$R.cmdline
cat /sys/devices/system/clocksource/clocksource0/current_clocksource > $D/$M-r$R.cs
grep -E "^ *(RES|CAL|LOC):" /proc/interrupts > $D/$M-r$R.before
./target/release/preemptlab bench lock --locks futex --pages 4k --workers 4x --repeat 1 --duration 3s --warmup 500ms --quiet --out $D/$M-r$R.json > $D/$M-r$R.out 2>&1
grep -E "^ *(RES|CAL|LOC):" /proc/interrupts > $D/$M-r$R.after
cat /sys/devices/system/clocksource/clocksource0/current_clocksource >> $D/$M-r$R.cs
