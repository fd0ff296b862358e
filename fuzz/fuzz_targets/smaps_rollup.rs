//! `/proc/PID/smaps_rollup`: `Key: N kB` lines (Pss, Rss, ...).
#![no_main]
use hostfacts::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let kib = parse::kv_kib(&text);
    // Every key is the trimmed part before a ':' of some line, and each line gives at most one key.
    assert!(kib.len() <= text.lines().count());
    let _ = kib.get("Pss");
});
