//! `/proc/interrupts`: the IPI rows `bench lock` counts per operation.
#![no_main]
use libfuzzer_sys::fuzz_target;
use osutil::procinterrupts::Ipis;

fuzz_target!(|data: &[u8]| {
    let a = Ipis::parse(&String::from_utf8_lossy(data));
    let _ = a.since(a);
});
