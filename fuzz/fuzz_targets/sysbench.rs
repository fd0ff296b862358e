//! sysbench's output: the report and the per-interval lines.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        let _ = pgharness::sysbench::parse_interval(line);
    }
    let _ = pgharness::sysbench::parse(&text);
});
