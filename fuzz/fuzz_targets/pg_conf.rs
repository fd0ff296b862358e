//! `postgresql.conf` and `postgresql.auto.conf` text.
#![no_main]
use hostfacts::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let conf = parse::pg_conf(&String::from_utf8_lossy(data));
    assert!(conf
        .keys()
        .all(|k| !k.chars().any(|c| c.is_ascii_uppercase())));
    for (setting, unit) in [
        ("shared_buffers", Some("8kB")),
        ("huge_page_size", Some("kB")),
    ] {
        if let Some(v) = conf.get(setting) {
            let _ = results::host::bytes::pg_memory(v, unit);
            let _ = results::host::bytes::size(v);
        }
    }
});
