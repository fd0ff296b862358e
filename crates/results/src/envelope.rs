//! The envelope every bench result shares: self-describing (tool, command line, time, host facts, spec).
//! Filling one from the live host is `hostfacts::envelope`'s job; this is the shape.

use serde::{Deserialize, Serialize};

/// Version of the result schema (docs/reference.md "Result files"). A file with a higher version is refused.
pub const SCHEMA_VERSION: u32 = 1;

/// Fields every result file starts with.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Envelope {
    /// Result schema version.
    pub schema_version: u32,
    /// `bench-lock`, `bench-pg`, ...
    pub kind: crate::Kind,
    /// preemptlab's version.
    pub tool_version: String,
    /// The command line, as run.
    pub command_line: Vec<String>,
    /// Start time, seconds since the Unix epoch.
    pub started_unix_s: u64,
    /// Start time, UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub started_utc: String,
    /// The host it ran on.
    pub host: crate::host::HostFacts,
    /// True when SIGINT/SIGTERM ended the run early. `bench net` and `bench latency` also write true after
    /// each cell until the matrix completes, so the file of a run that died another way says it is partial.
    pub interrupted: bool,
    /// How the guest was run, when the result was measured inside a VM (`preemptlab vm` adds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<crate::vm::VmBlock>,
}

/// Formats epoch seconds as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, proleptic Gregorian).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Whether a cell ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Ran every repetition.
    Ok,
    /// Could not run here (reason given).
    Skipped,
    /// Started and failed (reason given).
    Failed,
    /// Not reached: the run was interrupted.
    Interrupted,
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_formatting() {
        assert_eq!(super::utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::utc(1_795_318_072), "2026-11-22T03:27:52Z");
        assert_eq!(super::utc(951_782_400), "2000-02-29T00:00:00Z");
    }
}
