//! The other load on the host, seen before `check` measures anything: the PostgreSQL instances the audit
//! found, and the share of all CPU time others keep busy over a short window (this process's own CPU time
//! taken out, the hypervisor's steal not counted as busy). What it means, whether the host counts as
//! loaded and the synthetic bench needs the user's word, is [`crate::check::judge::loaded`]'s to say.

use std::time::Duration;

use results::check::{BenchCost, Load, LoadInstance};
use results::host::Audit;

/// How long `check` samples the CPU before deciding: long enough to see a steady load, short beside the
/// bench it may spare.
pub const WINDOW: Duration = Duration::from_secs(1);

/// This process's CPU time so far, clock ticks (threads included).
fn own_ticks() -> Option<u64> {
    hostfacts::parse::PidStat::parse(&std::fs::read_to_string("/proc/self/stat").ok()?)?.ticks()
}

/// Samples the load for `window` (sleeping: this process adds nothing to it) and records it with the
/// audit's instances and what the bench would cost; `loaded` is judged, `bench_ran` is false until the
/// caller runs it.
pub fn measure(audit: &Audit, bench_cost: BenchCost, window: Duration) -> Load {
    let before = (osutil::procstat::now(), own_ticks());
    std::thread::sleep(window);
    let after = (osutil::procstat::now(), own_ticks());
    let others_busy_pct = match (before, after) {
        ((Some(a), Some(oa)), (Some(b), Some(ob))) => a.others_busy_pct(b, ob.saturating_sub(oa)),
        _ => None,
    };
    let mut load = Load {
        window_s: window.as_secs_f64(),
        cpus: bench_cost.cpus,
        others_busy_pct,
        busy_threshold_pct: crate::check::judge::BUSY_PCT,
        instances: audit
            .instances
            .iter()
            .map(|i| LoadInstance {
                postmaster_pid: i.postmaster_pid,
                data_dir: i.data_dir.get().cloned(),
            })
            .collect(),
        loaded: None,
        bench_cost,
        bench_ran: false,
    };
    load.loaded = crate::check::judge::loaded(&load);
    load
}
