//! `/proc/meminfo`: `Key: N kB` lines, and the unitless `HugePages_*` counts; then a size sized in pages of
//! its `Hugepagesize` (0 kB included: the page size every sizing divides by).
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
    // Sizing in pages of whatever Hugepagesize says never panics (0 divided by zero before).
    if let Some(page) = m.get("Hugepagesize") {
        let size_kib = m.get("MemTotal").copied().unwrap_or(1 << 20);
        let own = hostfacts::hugepages::sizing::own_sizing(
            &results::host::hugepages::Basis::Given { size_kib },
            *page,
        );
        assert!(own.pages_needed >= own.pages_exact);
    }
});
