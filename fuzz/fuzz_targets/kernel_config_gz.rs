//! `/proc/config.gz`: gzip, then a kernel `.config`.
#![no_main]
use hostfacts::kernel;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(cfg) = kernel::config_gz(data) {
        assert!(cfg.keys().all(|k| k.starts_with("CONFIG_")));
    }
});
