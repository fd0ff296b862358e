//! `preemptlab sim`: the discrete-event model over a matrix of CPUs x workers x models x locks x pages
//! (x one swept parameter), `repeat` seeds per cell, written in the bench result schema so `compare` and
//! `report` read it next to measured results.

use anyhow::{anyhow, bail, Result};
use lab::lockrun::{self, Status};
use results::sim::{SimCell, SimResult, SimSpec, SimSummary};
use sim::{LockKind, Model, Outcome, Pages, Params, Workload};
use stats::Summary;

use crate::cli::SimArgs;

use crate::cli::split_list as list;

/// Applies `name=value` to the parameters through their JSON form (the value as JSON, else as a string).
fn set_param(p: &Params, kv: &str) -> Result<Params> {
    let Some((k, v)) = kv.split_once('=') else {
        bail!("--set {kv}: expected name=value, e.g. --set fault_4k_ns=2500");
    };
    let mut j = serde_json::to_value(p).expect("params serialize");
    let obj = j.as_object_mut().expect("an object");
    if !obj.contains_key(k) {
        let names: Vec<&String> = obj.keys().collect();
        bail!(
            "--set {kv}: no parameter {k:?} (known: {})",
            names
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let value: serde_json::Value =
        serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_string()));
    obj.insert(k.to_string(), value);
    serde_json::from_value(j).map_err(|e| anyhow!("--set {kv}: {e}"))
}

fn summarize(reps: &[Outcome], txn: bool) -> SimSummary {
    let f = |g: &dyn Fn(&Outcome) -> f64| stats::summarize(&reps.iter().map(g).collect::<Vec<_>>());
    SimSummary {
        ops_per_s: f(&|o| o.ops_per_s),
        txn_per_s: txn.then(|| f(&|o| o.txn_per_s.unwrap_or(0.0))),
        spinning: f(&|o| o.cpu.spinning),
        idle: f(&|o| o.cpu.idle),
        lhp_per_s: f(&|o| o.lhp_per_s),
        hold_p99_ns: f(&|o| o.hold_ns.p99 as f64),
        acquire_p99_ns: f(&|o| o.acquire_ns.p99 as f64),
        stalled_per_mop: f(&|o| o.stalled_per_mop),
    }
}

pub fn run(a: SimArgs) -> Result<i32> {
    let dur = lockrun::parse_duration(&a.duration).map_err(|e| anyhow!("--duration: {e}"))?;
    let warm = lockrun::parse_duration(&a.warmup).map_err(|e| anyhow!("--warmup: {e}"))?;
    if a.repeat == 0 || a.repeat > 1000 {
        bail!("--repeat {}: 1..1000", a.repeat);
    }
    let mut base = Params {
        hz: a.hz,
        duration_ns: dur.as_nanos() as u64,
        warmup_ns: warm.as_nanos() as u64,
        seed: a.seed,
        workload: Workload::parse(&a.workload).map_err(|e| anyhow!("--workload {e}"))?,
        ..Params::default()
    };
    for kv in &a.set {
        base = set_param(&base, kv)?;
    }
    let models: Vec<Model> = list(&a.models)
        .iter()
        .map(|m| Model::parse(m).map_err(|e| anyhow!("--models {e}")))
        .collect::<Result<_>>()?;
    let locks: Vec<LockKind> = list(&a.locks)
        .iter()
        .map(|m| LockKind::parse(m).map_err(|e| anyhow!("--locks {e}")))
        .collect::<Result<_>>()?;
    let pages: Vec<Pages> = list(&a.pages)
        .iter()
        .map(|m| Pages::parse(m).map_err(|e| anyhow!("--pages {e}")))
        .collect::<Result<_>>()?;
    let mut cpus = Vec::new();
    for c in list(&a.cpus) {
        let n: u32 = c
            .parse()
            .map_err(|_| anyhow!("--cpus {c}: expected a number"))?;
        cpus.push(n);
    }
    if models.is_empty() || locks.is_empty() || pages.is_empty() || cpus.is_empty() {
        bail!("--cpus, --models, --locks and --pages need at least one entry each");
    }
    let sweep = match &a.sweep {
        None => None,
        Some(s) => {
            let Some((k, vs)) = s.split_once('=') else {
                bail!("--sweep {s}: expected name=v1,v2,...");
            };
            let vals = list(vs);
            if vals.is_empty() {
                bail!("--sweep {s}: no values");
            }
            for v in &vals {
                set_param(&base, &format!("{k}={v}"))?;
            }
            Some((k.to_string(), vals))
        }
    };
    let mut cells = Vec::new();
    for &c in &cpus {
        let (_, workers) = lockrun::parse_counts("--workers", "workers", &a.workers, c, 100_000)
            .map_err(|e| anyhow!(e))?;
        for &w in &workers {
            for &pg in &pages {
                for &l in &locks {
                    let sweep_vals: Vec<Option<String>> = match &sweep {
                        None => vec![None],
                        Some((_, vs)) => vs.iter().cloned().map(Some).collect(),
                    };
                    for sv in sweep_vals {
                        for &m in &models {
                            let mut p = Params {
                                cpus: c,
                                workers: w,
                                model: m,
                                lock: l,
                                pages: pg,
                                ..base.clone()
                            };
                            if let (Some((k, _)), Some(v)) = (&sweep, &sv) {
                                p = set_param(&p, &format!("{k}={v}"))?;
                            }
                            sim::validate(&p).map_err(|e| anyhow!(e))?;
                            cells.push((p, sv.clone()));
                        }
                    }
                }
            }
        }
    }
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| lab::result::default_path("sim", lab::result::unix_now()));
    crate::term::claim_output(&out)?;
    let mut res = SimResult {
        envelope: lab::result::envelope("sim"),
        spec: SimSpec {
            params: base.clone(),
            set: a.set.clone(),
            sweep: sweep.clone(),
            repeat: a.repeat,
        },
        cells: Vec::new(),
    };
    lab::guard::install_signal_flag().map_err(|e| anyhow!(e))?;
    for (p, sv) in cells {
        if lab::guard::interrupted() {
            res.envelope.interrupted = true;
            break;
        }
        let mut reps = Vec::new();
        for r in 0..a.repeat {
            let q = Params {
                seed: p.seed + r as u64,
                ..p.clone()
            };
            reps.push(sim::simulate(&q).map_err(|e| anyhow!(e))?);
        }
        let cell = SimCell {
            model: p.model.name().into(),
            lock: p.lock.name().into(),
            pages: p.pages.name().into(),
            cpus: p.cpus,
            workers: p.workers,
            sweep: sv,
            status: Status::Ok,
            reason: None,
            summary: Some(summarize(&reps, p.workload == Workload::Txn)),
            reps,
        };
        if !a.quiet {
            eprintln!("{}", cell_line(&cell));
        }
        res.cells.push(cell);
        lab::result::write(&out, &res).map_err(|e| anyhow!(e))?;
    }
    crate::term::print_result(a.format, &res, |md| table(&res, md), &out, a.quiet);
    Ok(if res.envelope.interrupted {
        lab::guard::interrupted_exit_code()
    } else {
        0
    })
}

/// The cell's throughput: transactions per second for `--workload txn`, else operations per second.
fn throughput(s: &SimSummary) -> &Summary {
    s.txn_per_s.as_ref().unwrap_or(&s.ops_per_s)
}

fn cell_line(c: &SimCell) -> String {
    let s = c.summary.as_ref().expect("ran");
    format!(
        "{:>9} {:>5} {:>3} {:>4} CPUs {:>6}w{}: {:>7} {}  spin {:>3.0}%  idle {:>3.0}%  LHP/s {:>7.0}",
        c.model,
        c.lock,
        c.pages,
        c.cpus,
        c.workers,
        c.sweep.as_deref().map(|v| format!(" {v}")).unwrap_or_default(),
        report::lock_table::rate(throughput(s).median),
        if s.txn_per_s.is_some() { "tx/s" } else { "ops/s" },
        s.spinning.median * 100.0,
        s.idle.median * 100.0,
        s.lhp_per_s.median
    )
}

/// The table: one row per cell, with the ratio to the first model of the same configuration.
fn table(r: &SimResult, md: bool) -> String {
    let mut rows = Vec::new();
    for c in &r.cells {
        let s = c.summary.as_ref().expect("ran");
        let base = r
            .cells
            .iter()
            .find(|b| {
                b.lock == c.lock
                    && b.pages == c.pages
                    && b.cpus == c.cpus
                    && b.workers == c.workers
                    && b.sweep == c.sweep
            })
            .and_then(|b| b.summary.as_ref())
            .map(|b| throughput(s).median / throughput(b).median)
            .unwrap_or(f64::NAN);
        rows.push(vec![
            c.model.clone(),
            c.lock.clone(),
            c.pages.clone(),
            c.cpus.to_string(),
            c.workers.to_string(),
            c.sweep.clone().unwrap_or_default(),
            report::lock_table::rate(throughput(s).median),
            format!(
                "{}..{}",
                report::lock_table::rate(throughput(s).min),
                report::lock_table::rate(throughput(s).max)
            ),
            format!("{base:.2}"),
            format!("{:.0}%", s.spinning.median * 100.0),
            format!("{:.0}%", s.idle.median * 100.0),
            format!("{:.0}", s.lhp_per_s.median),
            report::lock_table::ns(s.hold_p99_ns.median),
            report::lock_table::ns(s.acquire_p99_ns.median),
        ]);
    }
    let sweep_name = r.spec.sweep.as_ref().map(|(k, _)| k.as_str()).unwrap_or("");
    let unit = if r.spec.params.workload == Workload::Txn {
        "tx/s"
    } else {
        "ops/s"
    };
    let header = [
        "model", "lock", "pages", "CPUs", "workers", sweep_name, unit, "min..max", "vs first",
        "spinning", "idle", "LHP/s", "hold p99", "acq p99",
    ];
    let keep: Vec<usize> = (0..header.len())
        .filter(|&i| i != 5 || !sweep_name.is_empty())
        .collect();
    let hdr: Vec<&str> = keep.iter().map(|&i| header[i]).collect();
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| keep.iter().map(|&i| r[i].clone()).collect())
        .collect();
    if md {
        // Text columns (model..pages, and the swept parameter when there is one) are left-aligned.
        let left = keep.iter().filter(|&&i| i < 6).count();
        return report::markup::markdown_table(&hdr, &rows, left);
    }
    use report::markup::{columns, Align};
    let align: Vec<Align> = keep
        .iter()
        .map(|&i| if i < 3 { Align::Left } else { Align::Right })
        .collect();
    format!(
        "sim: {} runs per cell of {} s virtual time (+{} s warm-up), HZ {}; model, not measurement (GUIDE.md \"sim\")\n\n{}",
        r.spec.repeat,
        r.spec.params.duration_ns as f64 / 1e9,
        r.spec.params.warmup_ns as f64 / 1e9,
        r.spec.params.hz,
        columns(&hdr, &align, &rows, 0, 160)
    )
}

#[cfg(test)]
mod tests {
    use shmlock::adaptive::{PARK_TIMEOUT_MAX, PARK_TIMEOUT_MIN, SPIN_BUDGET};

    /// The model's `adaptive` runs with the real lock's constants unless told otherwise.
    #[test]
    fn model_adaptive_uses_the_real_locks_constants() {
        let p = sim::Params::default();
        assert_eq!(p.adaptive_spin_ns, SPIN_BUDGET.as_nanos() as u64);
        assert_eq!(p.adaptive_park_min_ns, PARK_TIMEOUT_MIN.as_nanos() as u64);
        assert_eq!(p.adaptive_park_max_ns, PARK_TIMEOUT_MAX.as_nanos() as u64);
        assert_eq!(shmlock::adaptive::SLOTS as u32, sim::ADAPTIVE_SLOTS);
    }
}
