//! Parsing sysbench 1.0's `run` output (the OLTP Lua tests over `--db-driver=pgsql`): the final report and
//! the `--report-interval` lines.

use serde::{Deserialize, Serialize};

/// One `[ Ns ]` interval line.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Seconds since the start.
    pub t_s: f64,
    /// Transactions per second in the interval.
    pub tps: f64,
    /// The interval's latency percentile (`--percentile`), ms.
    pub latency_pct_ms: f64,
    /// Errors per second.
    pub err_per_s: f64,
}

/// sysbench's final report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// `sysbench 1.0.20`.
    pub version: Option<String>,
    /// `Number of threads`.
    pub threads: Option<u64>,
    /// Transactions.
    pub transactions: u64,
    /// Transactions per second over the run.
    pub tps: f64,
    /// Queries.
    pub queries: Option<u64>,
    /// Ignored errors.
    pub ignored_errors: Option<u64>,
    /// `total time`, s.
    pub total_time_s: Option<f64>,
    /// Latency min, ms.
    pub latency_min_ms: Option<f64>,
    /// Latency average, ms.
    pub latency_avg_ms: Option<f64>,
    /// Latency max, ms.
    pub latency_max_ms: Option<f64>,
    /// The percentile reported (`99` for `--percentile=99`).
    pub percentile: Option<f64>,
    /// That percentile's latency, ms.
    pub latency_pct_ms: Option<f64>,
    /// The interval lines.
    pub intervals: Vec<Interval>,
}

fn first_num(s: &str) -> Option<f64> {
    s.split_whitespace()
        .next()?
        .trim_end_matches('s')
        .parse()
        .ok()
}

fn field(parts: &[&str], name: &str) -> Option<f64> {
    let i = parts.iter().position(|p| *p == name)?;
    parts.get(i + 1)?.parse().ok()
}

/// Parses one `[ Ns ]` interval line.
pub fn parse_interval(line: &str) -> Option<Interval> {
    // [ 1s ] thds: 4 tps: 68865.28 qps: 68865.28 (r/w/o: ...) lat (ms,99%): 0.13 err/s: 0.00 reconn/s: 0.00
    let rest = line.strip_prefix('[')?;
    let (t, rest) = rest.split_once(']')?;
    let t_s = t.trim().trim_end_matches('s').parse().ok()?;
    let parts: Vec<&str> = rest.split_whitespace().collect();
    let lat_at = parts.iter().position(|p| p.starts_with("(ms,"))?;
    Some(Interval {
        t_s,
        tps: field(&parts, "tps:")?,
        latency_pct_ms: parts.get(lat_at + 1)?.parse().ok()?,
        err_per_s: field(&parts, "err/s:").unwrap_or(0.0),
    })
}

/// Output that is not a sysbench run's report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A `transactions:` line without its count or rate.
    #[error("unparseable transactions line: {line:?}")]
    Transactions {
        /// The line.
        line: String,
    },
    /// No `transactions:` line: the run failed (its last lines say why).
    #[error("sysbench printed no transactions line (did the run fail?); its last lines: {}", .tail.join(" | "))]
    NoTransactions {
        /// The output's last lines (at most 5).
        tail: Vec<String>,
    },
}

/// Parses sysbench's output of a `run`.
pub fn parse(text: &str) -> Result<Report, ParseError> {
    let mut r = Report::default();
    let mut seen_tx = false;
    for raw in text.lines() {
        let line = raw.trim();
        if let Some(i) = parse_interval(line) {
            r.intervals.push(i);
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            if let Some(v) = line.strip_prefix("sysbench ") {
                r.version = v.split_whitespace().next().map(str::to_string);
            }
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "Number of threads" => r.threads = first_num(value).map(|v| v as u64),
            "transactions" => {
                // 234741 (78064.43 per sec.)
                let bad = || ParseError::Transactions { line: line.into() };
                r.transactions = first_num(value).ok_or_else(bad)? as u64;
                r.tps = value
                    .split_once('(')
                    .and_then(|(_, v)| first_num(v))
                    .ok_or_else(bad)?;
                seen_tx = true;
            }
            "queries" => r.queries = first_num(value).map(|v| v as u64),
            "ignored errors" => r.ignored_errors = first_num(value).map(|v| v as u64),
            "total time" => r.total_time_s = first_num(value),
            "min" => r.latency_min_ms = first_num(value),
            "avg" => r.latency_avg_ms = first_num(value),
            "max" => r.latency_max_ms = first_num(value),
            k if k.ends_with("th percentile") => {
                r.percentile = k.trim_end_matches("th percentile").parse().ok();
                r.latency_pct_ms = first_num(value);
            }
            _ => {}
        }
    }
    if !seen_tx {
        let mut tail: Vec<String> = text.lines().rev().take(5).map(String::from).collect();
        tail.reverse();
        return Err(ParseError::NoTransactions { tail });
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!(
            "{}/tests/sysbench/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    #[test]
    fn captured_point_select() {
        let r = parse(&fixture("point-select-1.0.20.txt")).unwrap();
        assert_eq!(r.version.as_deref(), Some("1.0.20"));
        assert_eq!(r.threads, Some(4));
        assert!(r.transactions > 100_000, "{}", r.transactions);
        assert!(r.tps > 10_000.0);
        assert_eq!(r.queries, Some(r.transactions), "one query per transaction");
        assert_eq!(r.percentile, Some(99.0));
        let (avg, p99, max) = (
            r.latency_avg_ms.unwrap(),
            r.latency_pct_ms.unwrap(),
            r.latency_max_ms.unwrap(),
        );
        assert!(avg > 0.0 && avg <= p99 && p99 <= max);
        assert_eq!(r.intervals.len(), 3);
        assert_eq!(r.intervals[0].t_s, 1.0);
        assert!(r.intervals.iter().all(|i| i.tps > 1000.0));
    }

    #[test]
    fn captured_read_write() {
        let r = parse(&fixture("read-write-1.0.20.txt")).unwrap();
        assert!(r.transactions > 0 && r.tps > 0.0);
        assert!(r.queries.unwrap() > 10 * r.transactions);
        assert!(!r.intervals.is_empty());
    }

    #[test]
    fn a_failed_run_is_a_clear_error() {
        let e = parse("FATAL: Connection to database failed: could not connect to server\nFATAL: `thread_init' function failed\n").unwrap_err().to_string();
        assert!(
            e.contains("no transactions line") && e.contains("Connection to database failed"),
            "{e}"
        );
    }
}
