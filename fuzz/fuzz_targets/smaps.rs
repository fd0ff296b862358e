//! `/proc/PID/smaps`: the mappings, then the pick of PostgreSQL's main shared segment among them.
#![no_main]
use hostfacts::{parse, postgres};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let maps = parse::smaps(&text);
    // A mapping starts at a header line, whose permissions are four characters.
    assert!(maps.len() <= text.lines().count());
    assert!(maps.iter().all(|m| m.perms.len() == 4));
    if let Some(seg) = postgres::main_segment(&maps) {
        // The segment is one of the shared mappings, sized as its address range.
        assert!(maps.iter().any(|m| m.is_shared()
            && m.path == seg.mapping
            && m.end.saturating_sub(m.start) / 1024 == seg.size_kib));
    }
});
