//! Kernel log lines (`/dev/kmsg` records or `dmesg` text): the `Dynamic Preempt: <mode>` boot line.
#![no_main]
use hostfacts::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Some(mode) = parse::boot_log_preempt(&text) {
        assert!(!mode.contains('\n'));
        assert!(text.contains("Dynamic Preempt: "));
    }
});
