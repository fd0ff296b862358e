//! Filling and writing result files: the envelope (its type is `results::Envelope`) read from the live
//! host, and the file rewritten after each cell so an interrupted run keeps what it measured.

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use osutil::output::OutputError;

pub use results::{utc, Envelope, Kind, SCHEMA_VERSION};

/// A new envelope for `kind`, reading this host's facts now.
pub fn envelope(kind: Kind) -> Envelope {
    let now = unix_now();
    Envelope {
        schema_version: SCHEMA_VERSION,
        kind,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line: std::env::args().collect(),
        started_unix_s: now,
        started_utc: utc(now),
        host: hostfacts::host_facts(&hostfacts::Host::live()),
        interrupted: false,
        vm: None,
    }
}

/// Seconds since the epoch.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The default result path: `results/<kind>-<YYYYmmdd-HHMMSS>.json` under the current directory.
pub fn default_path(kind: Kind, started_unix_s: u64) -> PathBuf {
    let t = utc(started_unix_s)
        .replace(['-', ':'], "")
        .replace('T', "-")
        .replace('Z', "");
    PathBuf::from("results").join(format!("{kind}-{t}.json"))
}

/// Writes `value` as pretty JSON to `path` atomically, creating the directory.
pub fn write<T: Serialize>(path: &Path, value: &T) -> Result<(), OutputError> {
    let text = serde_json::to_string_pretty(value).map_err(|err| OutputError::Serialize {
        path: path.to_path_buf(),
        err,
    })?;
    osutil::output::write_atomic(path, &(text + "\n"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_formatting() {
        assert!(super::default_path(super::Kind::BenchLock, 0)
            .ends_with("bench-lock-19700101-000000.json"));
    }
}
