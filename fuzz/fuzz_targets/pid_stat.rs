//! `/proc/PID/stat`: ppid and minflt, after a command name that may hold spaces and parentheses.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pgharness::procsample;

fuzz_target!(|data: &[u8]| {
    let _ = procsample::stat_fields(&String::from_utf8_lossy(data));
});
