//! The envelope every bench result shares: self-describing (tool, command line, time, host facts, spec)
//! and rewritten after each cell so an interrupted run keeps what it measured.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Version of the result schema (GUIDE.md "Result files").
pub const SCHEMA_VERSION: u32 = 1;

/// Fields every result file starts with.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Envelope {
    /// Result schema version.
    pub schema_version: u32,
    /// `bench-lock`, `bench-pg`, ...
    pub kind: String,
    /// preemptlab's version.
    pub tool_version: String,
    /// The command line, as run.
    pub command_line: Vec<String>,
    /// Start time, seconds since the Unix epoch.
    pub started_unix_s: u64,
    /// Start time, UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub started_utc: String,
    /// The host it ran on.
    pub host: hostfacts::HostFacts,
    /// True when SIGINT/SIGTERM ended the run early.
    pub interrupted: bool,
    /// How the guest was run, when the result was measured inside a VM (`preemptlab vm` adds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<vm::VmBlock>,
}

impl Envelope {
    /// A new envelope for `kind`, reading this host's facts now.
    pub fn new(kind: &str) -> Envelope {
        let now = unix_now();
        Envelope {
            schema_version: SCHEMA_VERSION,
            kind: kind.to_string(),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            command_line: std::env::args().collect(),
            started_unix_s: now,
            started_utc: utc(now),
            host: hostfacts::host_facts(&hostfacts::Host::live()),
            interrupted: false,
            vm: None,
        }
    }
}

/// Seconds since the epoch.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
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

/// The default result path: `results/<kind>-<YYYYmmdd-HHMMSS>.json` under the current directory.
pub fn default_path(kind: &str, started_unix_s: u64) -> PathBuf {
    let t = utc(started_unix_s)
        .replace(['-', ':'], "")
        .replace('T', "-")
        .replace('Z', "");
    PathBuf::from("results").join(format!("{kind}-{t}.json"))
}

/// Writes `value` as pretty JSON to `path` atomically, creating the directory.
pub fn write<T: Serialize>(path: &Path, value: &T) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    write_text(path, &(text + "\n"))
}

/// Writes `text` to `path` atomically (a temp file renamed into place), creating the directory.
pub fn write_text(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp-preemptlab");
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(&tmp, text).map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .map_err(|e| format!("renaming {} to {}: {e}", tmp.display(), path.display()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_formatting() {
        assert_eq!(super::utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::utc(1_795_318_072), "2026-11-22T03:27:52Z");
        assert_eq!(super::utc(951_782_400), "2000-02-29T00:00:00Z");
        assert!(super::default_path("bench-lock", 0).ends_with("bench-lock-19700101-000000.json"));
    }
}
