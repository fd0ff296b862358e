//! What the CLI tests share (each test binary uses a part of it).
#![allow(dead_code)]

pub mod hugetlb;

use std::process::Output;

/// Bad input was refused cleanly: exit 2, no panic, one line on stderr that contains `want` (`context`
/// names the case in failure messages).
pub fn assert_refused(o: &Output, context: &str, want: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{context}: {err}");
    assert!(!err.contains("panicked"), "{context}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{context}: one line: {err}");
    assert!(err.contains(want), "{context}: {err} should name {want:?}");
}
