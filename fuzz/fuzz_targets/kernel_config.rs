//! A kernel `.config` (`/boot/config-<release>`).
#![no_main]
use hostfacts::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cfg = parse::kernel_config(&String::from_utf8_lossy(data));
    assert!(cfg.keys().all(|k| k.starts_with("CONFIG_")));
});
