//! /sys/kernel/debug/sched/preempt: the dynamic preemption modes with the active one in parentheses.

use super::choices::choices;

/// Why a `/sys/kernel/debug/sched/preempt` text names no active mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DebugfsPreemptError {
    /// Nothing but white space (a kernel that prints no mode: a linux-next series of autumn 2026 without its
    /// fix).
    #[error("empty: the kernel printed no mode")]
    Empty,
    /// No mode in parentheses.
    #[error("no active mode in parentheses in {0:?}")]
    NoActive(String),
    /// More than one mode in parentheses: which one runs is not said.
    #[error("ambiguous: more than one mode in parentheses in {0:?}")]
    Ambiguous(String),
}

/// The active mode and the offered modes of `/sys/kernel/debug/sched/preempt`, e.g. `none voluntary (full)
/// lazy` (kernel/sched/debug.c sched_dynamic_show: the offered modes, the active one in parentheses).
pub fn debugfs_preempt(text: &str) -> Result<(String, Vec<String>), DebugfsPreemptError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(DebugfsPreemptError::Empty);
    }
    let active: Vec<&str> = t.split_whitespace().filter_map(active_mode).collect();
    match active.as_slice() {
        [] => Err(DebugfsPreemptError::NoActive(t.to_string())),
        [one] => Ok((one.to_string(), choices(t))),
        _ => Err(DebugfsPreemptError::Ambiguous(t.to_string())),
    }
}

/// The mode a word of the debugfs file marks as active: `(name)`, the name non-empty and without
/// parentheses of its own.
pub fn active_mode(word: &str) -> Option<&str> {
    word.strip_prefix('(')
        .and_then(|w| w.strip_suffix(')'))
        .filter(|m| !m.is_empty() && !m.contains(['(', ')']))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debugfs_line() {
        let (a, o) = debugfs_preempt("none voluntary (full) lazy\n").unwrap();
        assert_eq!(a, "full");
        assert_eq!(o, vec!["none", "voluntary", "full", "lazy"]);
        assert_eq!(
            debugfs_preempt("full lazy"),
            Err(DebugfsPreemptError::NoActive("full lazy".into()))
        );
        assert_eq!(debugfs_preempt("full (lazy) \n").unwrap().0, "lazy");
    }

    /// Regression (issue 29): an empty file (a linux-next series) and two modes in parentheses were taken as
    /// no line and as the first mode; both name no mode.
    #[test]
    fn debugfs_empty_or_ambiguous_names_no_mode() {
        assert_eq!(debugfs_preempt(""), Err(DebugfsPreemptError::Empty));
        assert_eq!(debugfs_preempt(" \n"), Err(DebugfsPreemptError::Empty));
        assert!(matches!(
            debugfs_preempt("(full) (lazy)"),
            Err(DebugfsPreemptError::Ambiguous(_))
        ));
        assert!(matches!(
            debugfs_preempt("()"),
            Err(DebugfsPreemptError::NoActive(_))
        ));
        // Found by fuzzing (fuzz/corpus/debugfs_preempt/crash-empty-mode-in-parentheses): `(()` was taken
        // as an active mode with an empty name.
        assert!(matches!(
            debugfs_preempt("(()"),
            Err(DebugfsPreemptError::NoActive(_))
        ));
        assert_eq!(active_mode("(lazy)"), Some("lazy"));
    }
}
