//! `/proc/meminfo`: `Key: N kB` lines, and the unitless `HugePages_*` counts.
#![no_main]
use hostfacts::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let m = parse::kv_kib(&text);
    // A value is the first word after the key of one of its lines (the last such line wins).
    for (k, v) in &m {
        let last = text
            .lines()
            .filter_map(|l| l.split_once(':'))
            .filter(|(key, _)| key.trim() == k)
            .filter_map(|(_, rest)| rest.split_whitespace().next()?.parse::<u64>().ok())
            .next_back();
        assert_eq!(last, Some(*v));
    }
});
