//! `/proc/net/snmp` and `/proc/net/netstat`: pairs of `Section: names` / `Section: values` lines.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let c = hostfacts::parse::net_counters(&text);
    // A section holds at most as many counters as its lines have words.
    let words = text.split_whitespace().count();
    assert!(c.values().map(|m| m.len()).sum::<usize>() <= words);
});
