//! `/sys/kernel/debug/sched/preempt`, e.g. `none voluntary (full) lazy`, and the model name in it.
#![no_main]
use hostfacts::{parse, PreemptModel};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok((active, offered)) = parse::debugfs_preempt(&text) {
        assert!(!offered.is_empty());
        if let Some(m) = PreemptModel::parse(&active) {
            assert_eq!(PreemptModel::parse(m.as_str()), Some(m));
        }
    }
});
