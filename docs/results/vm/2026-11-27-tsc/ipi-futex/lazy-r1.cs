tsc
tsc
