//! `/sys/kernel/debug/sched/preempt`, e.g. `none voluntary (full) lazy`, and the model name in it: one mode
//! in parentheses or none at all (an empty file, no parentheses, two of them: no mode, never a panic).
#![no_main]
use hostfacts::parse;
use libfuzzer_sys::fuzz_target;
use results::host::kernel::PreemptModel;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok((active, offered)) = parse::debugfs_preempt(&text) {
        assert!(!offered.is_empty());
        let marked = text
            .split_whitespace()
            .filter_map(parse::active_mode)
            .count();
        assert_eq!(marked, 1, "exactly one active mode in {text:?}");
        assert!(!active.is_empty());
        if let Some(m) = PreemptModel::parse(&active) {
            assert_eq!(PreemptModel::parse(m.as_str()), Some(m));
        }
    }
});
