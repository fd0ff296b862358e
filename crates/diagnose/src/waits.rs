//! Wait events of a server's active client backends, sampled over one read-only connection (`--pg`), and
//! its buffer eviction counter at both ends of the window.
//!
//! `pg_stat_activity.wait_event` shows `SpinDelay` only while a backend sleeps in the spin back-off, never
//! while it spins (an on-CPU spinner shows no wait event, counted here as `CPU`); that is why the on-CPU
//! samples, not this, carry the verdict. Evictions: `pg_stat_io.evictions` (PostgreSQL 16+); before 16 the
//! nearest counter is `pg_stat_bgwriter.buffers_alloc` (buffers allocated), and the result says which.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use results::diagnose::Waits;

/// One read of pg_stat_activity.
#[derive(Debug, Clone, Default)]
pub struct Read {
    /// Seconds since the window opened.
    pub t_s: f64,
    /// `type:event` (or `CPU`) of each active client backend.
    pub events: BTreeMap<String, u64>,
}

/// Whether an event is a wait on the client (`Client:ClientRead`, `Client:ClientWrite`).
pub fn on_client(event: &str) -> bool {
    event.starts_with("Client:")
}

/// What the sampler ends with.
#[derive(Debug, Clone, Default)]
pub struct Ended {
    /// Reads taken.
    pub reads: u64,
    /// Evictions (or allocations) over the window, and the counter's name.
    pub evictions: Option<(u64, String)>,
    /// Why something is missing.
    pub note: Option<String>,
    /// The active client backends seen, by pid.
    pub backends: std::collections::BTreeSet<i32>,
}

const ACTIVITY: &str = "SELECT pid, coalesce(wait_event_type || ':' || wait_event, 'CPU') \
     FROM pg_stat_activity WHERE state = 'active' AND backend_type = 'client backend' \
     AND pid <> pg_backend_pid()";

fn eviction_query(version_num: i64) -> (&'static str, &'static str) {
    if version_num >= 160000 {
        (
            "SELECT coalesce(sum(evictions), 0)::bigint FROM pg_stat_io",
            "pg_stat_io.evictions",
        )
    } else {
        (
            "SELECT buffers_alloc FROM pg_stat_bgwriter",
            "pg_stat_bgwriter.buffers_alloc (buffers allocated; pg_stat_io.evictions needs PostgreSQL 16)",
        )
    }
}

fn counter(client: &mut postgres::Client, sql: &str) -> Option<u64> {
    client
        .query_one(sql, &[])
        .ok()
        .and_then(|r| r.try_get::<_, i64>(0).ok())
        .map(|v| v.max(0) as u64)
}

/// Samples every `interval` until `stop` is set, sending each read; returns the totals. Runs on its own
/// thread (the client blocks).
pub fn sample(
    mut client: postgres::Client,
    t0: Instant,
    interval: Duration,
    stop: Arc<AtomicBool>,
    tx: mpsc::Sender<Read>,
) -> Ended {
    let mut ended = Ended::default();
    let version: i64 = client
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .ok()
        .and_then(|r| r.try_get::<_, i32>(0).ok())
        .map(i64::from)
        .unwrap_or(0);
    let (sql, name) = eviction_query(version);
    let before = counter(&mut client, sql);
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        match client.query(ACTIVITY, &[]) {
            Ok(rows) => {
                let mut events = BTreeMap::new();
                for r in rows {
                    let (pid, e): (i32, String) = (r.get(0), r.get(1));
                    ended.backends.insert(pid);
                    *events.entry(e).or_insert(0) += 1;
                }
                ended.reads += 1;
                let _ = tx.send(Read {
                    t_s: t0.elapsed().as_secs_f64(),
                    events,
                });
            }
            Err(e) => {
                ended.note = Some(format!("pg_stat_activity: {e}"));
                break;
            }
        }
        next += interval;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    let after = counter(&mut client, sql);
    ended.evictions = match (before, after) {
        (Some(b), Some(a)) => Some((a.saturating_sub(b), name.to_string())),
        _ => {
            ended
                .note
                .get_or_insert_with(|| format!("{name}: not readable"));
            None
        }
    };
    ended
}

/// A sampler's result: its reads, the events seen in all, the eviction rate over the window.
pub(crate) fn finish(
    dsn: String,
    e: Ended,
    totals: BTreeMap<String, u64>,
    observed_s: f64,
) -> Waits {
    type Counts = Vec<(String, u64)>;
    let (client, mut events): (Counts, Counts) =
        totals.into_iter().partition(|(e, _)| on_client(e));
    events.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let waiting_on_client: u64 = client.iter().map(|(_, n)| n).sum();
    Waits {
        dsn,
        reads: e.reads,
        backends_seen: e.backends.len() as u64,
        sightings: Some(events.iter().map(|(_, n)| n).sum::<u64>() + waiting_on_client),
        events,
        waiting_on_client: Some(waiting_on_client),
        evictions_per_s: e
            .evictions
            .as_ref()
            .map(|(n, _)| *n as f64 / observed_s.max(1e-9)),
        evictions_source: e.evictions.map(|(_, s)| s),
        note: e.note,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn eviction_counter_by_version() {
        assert_eq!(
            super::eviction_query(150008).1.split(' ').next(),
            Some("pg_stat_bgwriter.buffers_alloc")
        );
        assert_eq!(super::eviction_query(160000).1, "pg_stat_io.evictions");
    }

    /// Regression (issue 46 item 4): 8 clients read for 30 reads were "227 backends seen" (the
    /// sightings), and `Client:ClientRead` was counted among the active backends' waits.
    #[test]
    fn backends_counted_once_and_client_waits_apart_regression() {
        let ended = super::Ended {
            reads: 30,
            backends: (1..=8).collect(),
            ..Default::default()
        };
        let totals = [
            ("CPU".to_string(), 150),
            ("Client:ClientRead".to_string(), 60),
            ("LWLock:WALWrite".to_string(), 17),
        ]
        .into_iter()
        .collect();
        let w = super::finish("dbname=x".into(), ended, totals, 10.0);
        assert_eq!(w.backends_seen, 8);
        assert_eq!(w.sightings, Some(227));
        assert_eq!(w.waiting_on_client, Some(60));
        assert!(
            w.events.iter().all(|(e, _)| !e.starts_with("Client:")),
            "{:?}",
            w.events
        );
        assert_eq!(w.events[0], ("CPU".to_string(), 150));
    }
}
