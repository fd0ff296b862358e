#!/bin/sh
# Run in a guest (vng --exec): par (built on the host: gcc -O2 -static -o par par.c) at 1 and 2 processes, three
# rounds of each mode, for 3 s each; the clocksource before and after.
cd "$(dirname "$0")"
{ cat /sys/devices/system/clocksource/clocksource0/current_clocksource
for r in 1 2 3; do for m in p s a; do ./par $m 1 3; ./par $m 2 3; done; done
cat /sys/devices/system/clocksource/clocksource0/current_clocksource; } > out-guest.txt 2>&1
