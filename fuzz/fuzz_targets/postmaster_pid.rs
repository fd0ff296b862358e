//! PostgreSQL's `postmaster.pid`.
#![no_main]
use hostfacts::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let p = parse::postmaster_pid(&text);
    if let Some(pid) = p.pid {
        assert_eq!(text.lines().next().map(|l| l.trim().parse()), Some(Ok(pid)));
    }
});
