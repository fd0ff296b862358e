//! A result file's envelope (its type is `results::Envelope`) filled from the live host, and the default
//! name of a result file. Writing it is `osutil::output::write_json`'s.

use std::path::PathBuf;

use osutil::unix_now;
use results::{utc, Envelope, Kind, SCHEMA_VERSION};

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
        host: crate::host_facts(&crate::Host::live()),
        interrupted: false,
        vm: None,
    }
}

/// The default result path: `results/<kind>-<YYYYmmdd-HHMMSS>.json` under the current directory.
pub fn default_path(kind: Kind, started_unix_s: u64) -> PathBuf {
    let t = utc(started_unix_s)
        .replace(['-', ':'], "")
        .replace('T', "-")
        .replace('Z', "");
    PathBuf::from("results").join(format!("{kind}-{t}.json"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_formatting() {
        assert!(super::default_path(results::Kind::BenchLock, 0)
            .ends_with("bench-lock-19700101-000000.json"));
    }
}
