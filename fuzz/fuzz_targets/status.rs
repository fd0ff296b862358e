//! `/proc/PID/status`: as text (Name, PPid) and as `Key: N kB` (VmPTE, RssShmem, context switches).
#![no_main]
use hostfacts::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let kv = parse::kv_text(&text);
    let kib = parse::kv_kib(&text);
    // Both split each line at its first ':' and trim the key, so every numeric key is a text key.
    assert!(kib.keys().all(|k| kv.contains_key(k)));
    let _ = kv.get("PPid").and_then(|p| p.parse::<u32>().ok());
});
