//! Parsing pgbench's output (PostgreSQL 13 to 17): the summary `printResults()` prints and the per-second
//! `progress:` lines (`-P 1`), from `src/bin/pgbench/pgbench.c`. 13 reports TPS including and excluding
//! connection establishment; 14 reports the initial connection time and TPS without it; 15 adds failed
//! transactions (also in progress lines) and the maximum number of tries.

use serde::{Deserialize, Serialize};

/// One `progress:` line.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Seconds since the start.
    pub t_s: f64,
    /// Transactions per second in that interval.
    pub tps: f64,
    /// Mean latency in that interval, ms.
    pub latency_ms: f64,
    /// Latency standard deviation, ms.
    pub stddev_ms: f64,
    /// Failed transactions in the interval (PG 15+), if printed.
    pub failed: Option<u64>,
}

/// pgbench's summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The version pgbench printed in its first line (PG 14+), e.g. `15.18`.
    pub version: Option<String>,
    /// `transaction type`.
    pub transaction_type: Option<String>,
    /// `scaling factor`.
    pub scale: Option<u64>,
    /// `query mode`.
    pub query_mode: Option<String>,
    /// `number of clients`.
    pub clients: Option<u64>,
    /// `number of threads`.
    pub threads: Option<u64>,
    /// `duration` in s (time-based runs).
    pub duration_s: Option<f64>,
    /// Transactions processed.
    pub transactions: u64,
    /// Failed transactions (PG 15+).
    pub failed: Option<u64>,
    /// `latency average`, ms.
    pub latency_avg_ms: Option<f64>,
    /// `latency stddev`, ms.
    pub latency_stddev_ms: Option<f64>,
    /// `initial connection time`, ms (PG 14+).
    pub initial_connection_ms: Option<f64>,
    /// `average connection time`, ms (PG 14+ with -C).
    pub average_connection_ms: Option<f64>,
    /// TPS without connection time: PG 14+ "without initial connection time", PG 13 "excluding connections
    /// establishing".
    pub tps: f64,
    /// TPS including connection establishment (PG 13 only).
    pub tps_including_connections: Option<f64>,
    /// The per-second progress lines.
    pub progress: Vec<Progress>,
}

/// Output that is not a pgbench run's summary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The transaction count is not a number.
    #[error("unparseable transaction count: {line:?}")]
    Transactions {
        /// The line.
        line: String,
    },
    /// A `tps =` line without a number.
    #[error("unparseable tps line: {line:?}")]
    Tps {
        /// The line.
        line: String,
    },
    /// No `tps =` line: the run failed (its last lines say why).
    #[error("pgbench printed no tps line (did the run fail?); its last lines: {}", .tail.join(" | "))]
    NoTps {
        /// The output's last lines (at most 5).
        tail: Vec<String>,
    },
}

fn after<'a>(line: &'a str, prefix: &str) -> Option<&'a str> {
    line.strip_prefix(prefix).map(str::trim)
}

fn num<T: std::str::FromStr>(s: &str) -> Option<T> {
    s.split(|c: char| c.is_whitespace() || c == '/' || c == ',')
        .next()?
        .parse()
        .ok()
}

/// Parses one `progress:` line.
pub fn parse_progress(line: &str) -> Option<Progress> {
    // progress: 1.0 s, 79875.3 tps, lat 0.047 ms stddev 0.042, 0 failed
    let rest = line.strip_prefix("progress: ")?;
    let parts: Vec<&str> = rest.split(", ").collect();
    let t_s = num(parts.first()?.trim_end_matches(" s"))?;
    let tps = num(parts.get(1)?.trim_end_matches(" tps"))?;
    let lat = parts.get(2)?.strip_prefix("lat ")?;
    let (lat_ms, sd) = lat.split_once(" ms stddev ")?;
    let failed = parts
        .get(3)
        .and_then(|p| p.strip_suffix(" failed"))
        .and_then(|n| n.trim().parse().ok());
    Some(Progress {
        t_s,
        tps,
        latency_ms: lat_ms.trim().parse().ok()?,
        stddev_ms: num(sd)?,
        failed,
    })
}

/// Parses pgbench's combined output (stderr with progress lines, then stdout with the summary; any order).
pub fn parse(text: &str) -> Result<Summary, ParseError> {
    let mut s = Summary::default();
    let mut tps = None;
    for raw in text.lines() {
        let line = raw.trim();
        if let Some(p) = parse_progress(line) {
            s.progress.push(p);
        } else if let Some(v) = after(line, "pgbench (") {
            s.version = v
                .split_whitespace()
                .next()
                .map(|x| x.trim_end_matches(')').to_string());
        } else if let Some(v) = after(line, "transaction type:") {
            s.transaction_type = Some(v.to_string());
        } else if let Some(v) = after(line, "scaling factor:") {
            s.scale = num(v);
        } else if let Some(v) = after(line, "query mode:") {
            s.query_mode = Some(v.to_string());
        } else if let Some(v) = after(line, "number of clients:") {
            s.clients = num(v);
        } else if let Some(v) = after(line, "number of threads:") {
            s.threads = num(v);
        } else if let Some(v) = after(line, "duration:") {
            s.duration_s = num(v.trim_end_matches(" s"));
        } else if let Some(v) = after(line, "number of transactions actually processed:") {
            s.transactions =
                num(v).ok_or_else(|| ParseError::Transactions { line: line.into() })?;
        } else if let Some(v) = after(line, "number of failed transactions:") {
            s.failed = num(v);
        } else if let Some(v) = after(line, "latency average =") {
            s.latency_avg_ms = num(v.trim_end_matches(" ms"));
        } else if let Some(v) = after(line, "latency stddev =") {
            s.latency_stddev_ms = num(v.trim_end_matches(" ms"));
        } else if let Some(v) = after(line, "initial connection time =") {
            s.initial_connection_ms = num(v.trim_end_matches(" ms"));
        } else if let Some(v) = after(line, "average connection time =") {
            s.average_connection_ms = num(v.trim_end_matches(" ms"));
        } else if let Some(v) = after(line, "tps =") {
            let value: f64 = num(v).ok_or_else(|| ParseError::Tps { line: line.into() })?;
            if v.contains("(including connections establishing)") {
                s.tps_including_connections = Some(value);
            } else {
                tps = Some(value); // "without initial connection time" (14+) or "excluding ..." (13)
            }
        }
    }
    s.tps = tps.ok_or_else(|| {
        let mut tail: Vec<String> = text.lines().rev().take(5).map(String::from).collect();
        tail.reverse();
        ParseError::NoTps { tail }
    })?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!(
            "{}/tests/pgbench/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    #[test]
    fn captured_pg15_outputs() {
        let s = parse(&fixture("pg15-select-only.txt")).unwrap();
        assert_eq!(s.version.as_deref(), Some("15.18"));
        assert_eq!(
            s.transaction_type.as_deref(),
            Some("<builtin: select only>")
        );
        assert_eq!((s.scale, s.clients, s.threads), (Some(1), Some(4), Some(2)));
        assert_eq!(s.query_mode.as_deref(), Some("prepared"));
        assert_eq!(s.duration_s, Some(3.0));
        assert_eq!(s.transactions, 250601);
        assert_eq!(s.failed, Some(0));
        assert_eq!(s.latency_avg_ms, Some(0.044));
        assert_eq!(s.latency_stddev_ms, Some(0.045));
        assert_eq!(s.initial_connection_ms, Some(7.622));
        assert!((s.tps - 83684.270459).abs() < 1e-6);
        assert_eq!(s.tps_including_connections, None);
        assert_eq!(s.progress.len(), 2);
        assert_eq!(
            s.progress[0],
            Progress {
                t_s: 1.0,
                tps: 79875.3,
                latency_ms: 0.047,
                stddev_ms: 0.042,
                failed: Some(0)
            }
        );
        let s = parse(&fixture("pg15-tpcb-like.txt")).unwrap();
        assert_eq!(
            s.transaction_type.as_deref(),
            Some("<builtin: TPC-B (sort of)>")
        );
        assert!(s.tps > 0.0 && s.transactions > 0 && !s.progress.is_empty());
    }

    #[test]
    fn every_version_from_13_to_17() {
        let s = parse(&fixture("pg13.txt")).unwrap();
        assert_eq!(s.version, None, "13 prints no version line");
        assert!(
            (s.tps - 41998.724020).abs() < 1e-6,
            "tps excluding connections"
        );
        assert_eq!(s.tps_including_connections, Some(41940.185313));
        assert_eq!(s.initial_connection_ms, None);
        assert_eq!(s.progress[1].failed, None, "no failed count before 15");
        let s = parse(&fixture("pg14.txt")).unwrap();
        assert_eq!(s.version.as_deref(), Some("14.13"));
        assert!((s.tps - 40166.307113).abs() < 1e-6);
        assert_eq!(s.initial_connection_ms, Some(6.512));
        assert_eq!(s.failed, None);
        for (f, v, tps, n) in [
            ("pg16.txt", "16.4", 1509.448270, 2),
            ("pg17.txt", "17.2", 39285.334112, 3),
        ] {
            let s = parse(&fixture(f)).unwrap();
            assert_eq!(s.version.as_deref(), Some(v));
            assert!((s.tps - tps).abs() < 1e-6, "{f}");
            assert_eq!(s.failed, Some(0));
            assert_eq!(s.progress.len(), n);
            assert!(s.progress.iter().all(|p| p.failed == Some(0)));
        }
    }

    #[test]
    fn a_failed_run_is_a_clear_error() {
        let e = parse("pgbench: error: connection to server on socket \"/tmp/x/.s.PGSQL.5432\" failed: No such file or directory\npgbench: error: could not create connection for initialization\n").unwrap_err().to_string();
        assert!(
            e.contains("no tps line") && e.contains("could not create connection"),
            "{e}"
        );
        assert_eq!(
            parse("tps = many (without initial connection time)"),
            Err(ParseError::Tps {
                line: "tps = many (without initial connection time)".into()
            })
        );
    }
}
