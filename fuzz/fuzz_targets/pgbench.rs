//! pgbench's output: the summary and the `progress:` lines.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let progress = text
        .lines()
        .filter(|l| pgharness::pgbench::parse_progress(l.trim()).is_some())
        .count();
    if let Ok(s) = pgharness::pgbench::parse(&text) {
        // Each progress line of the text is kept once.
        assert_eq!(s.progress.len(), progress);
    }
});
