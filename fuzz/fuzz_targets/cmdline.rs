//! `/proc/PID/cmdline` (NUL-separated) and a postmaster's options in it; `/proc/cmdline` parameters.
#![no_main]
use hostfacts::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let args = parse::cmdline_args(data);
    assert!(args.iter().all(|a| !a.is_empty() && !a.contains('\0')));
    let (_dir, _port, settings) = parse::postmaster_args(&args);
    // Setting names are folded as PostgreSQL does: lower case, '-' as '_'.
    assert!(settings.keys().all(|k| !k.contains('-')));
    let text = String::from_utf8_lossy(data);
    if let Some(v) = parse::cmdline_param(&text, "preempt") {
        assert!(!v.contains(char::is_whitespace));
    }
});
