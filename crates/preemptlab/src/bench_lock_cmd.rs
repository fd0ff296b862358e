//! `preemptlab bench lock`.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use lab::lockbench::Spec;
use lab::lockrun::{self, RunOptions};

use crate::cli::BenchLockArgs;

pub fn run(a: BenchLockArgs) -> Result<i32> {
    let host = hostfacts::Host::live();
    let mem = hostfacts::audit::memory_facts(&host);
    let cpus = hostfacts::audit::kernel_facts(&host)
        .cpus
        .value
        .unwrap_or(1);
    let locks: Vec<String> = a
        .locks
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    for l in &locks {
        shmlock::LockKind::parse(l).map_err(|e| anyhow!("--locks: {e}"))?;
    }
    let pages: Vec<String> = a
        .pages
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    for p in &pages {
        shmlock::shm::Backing::parse(p).map_err(|e| anyhow!("--pages: {e}"))?;
    }
    if locks.is_empty() || pages.is_empty() {
        bail!("--locks and --pages need at least one entry each");
    }
    let (workers_given, workers) =
        lockrun::parse_workers(&a.workers, cpus).map_err(|e| anyhow!(e))?;
    let duration = lockrun::parse_duration(&a.duration).map_err(|e| anyhow!("--duration: {e}"))?;
    let warmup = lockrun::parse_duration(&a.warmup).map_err(|e| anyhow!("--warmup: {e}"))?;
    if duration < Duration::from_millis(100) {
        bail!("--duration {}: at least 100ms", a.duration);
    }
    if a.repeat == 0 || a.repeat > 1000 {
        bail!("--repeat {}: 1..1000", a.repeat);
    }
    let descriptors = a
        .descriptors
        .unwrap_or_else(|| lab::lockbench::default_descriptors(mem.total_kib.value));
    if !(1024..=(1 << 28)).contains(&descriptors) {
        bail!("--descriptors {descriptors}: 1024..268435456");
    }
    let reconnect_every = match a.reconnect_every.as_str() {
        "none" => None,
        "auto" if a.threads => None,
        "auto" => Some(lab::lockbench::auto_reconnect_every(descriptors)),
        k => match k.parse::<u64>() {
            Ok(0) | Err(_) => {
                bail!("--reconnect-every {k}: give a positive number of operations, auto or none")
            }
            Ok(_) if a.threads => bail!(
                "--reconnect-every replaces worker processes: it cannot be combined with --threads"
            ),
            Ok(n) => Some(n),
        },
    };
    // Longer than a second per operation is no lock benchmark; far longer overflows the deadline arithmetic.
    for (flag, ns) in [("--cs-ns", a.cs_ns), ("--work-ns", a.work_ns)] {
        if ns > 1_000_000_000 {
            bail!("{flag} {ns}: at most 1000000000 (1 s of busy work per operation)");
        }
    }
    let spec = Spec {
        locks,
        pages,
        workers_given,
        workers,
        duration_s: duration.as_secs_f64(),
        warmup_s: warmup.as_secs_f64(),
        repeat: a.repeat,
        descriptors,
        cs_ns: a.cs_ns,
        work_ns: a.work_ns,
        reconnect_every,
        reconnect_every_given: a.reconnect_every.clone(),
        threads: a.threads,
        prefetch_next: a.prefetch_next,
        start_age: a.start_age.clone(),
        seed: a.seed,
    };
    if a.reserve_hugepages
        && a.pages.split(',').any(|p| p.trim().starts_with("hugetlb"))
        && !hostfacts::host::is_root()
    {
        bail!("--reserve-hugepages resizes the hugetlb pool: run as root, or leave it out and grow the pool yourself");
    }
    let out = a
        .result
        .out
        .clone()
        .unwrap_or_else(|| lab::result::default_path("bench-lock", lab::result::unix_now()));
    crate::term::claim_output(&out)?;
    let tty = std::io::stderr().is_terminal() && !a.result.quiet;
    let bar = if tty {
        let pb = indicatif::ProgressBar::new(1000);
        pb.set_style(
            indicatif::ProgressStyle::with_template("{prefix:>9} [{bar:30}] {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        Some(pb)
    } else {
        None
    };
    let pb = bar.clone();
    let quiet = a.result.quiet;
    let opts = RunOptions {
        reserve_hugepages: a.reserve_hugepages,
        out: out.clone(),
        progress: Box::new(move |ci, n, label, phase, frac, rate| {
            if let Some(pb) = &pb {
                pb.set_prefix(format!("{}/{}", ci + 1, n));
                pb.set_position((((ci as f64) + frac) / n as f64 * 1000.0) as u64);
                pb.set_message(format!(
                    "{label} {phase} {}",
                    report::lock_table::rate(rate)
                ));
            }
        }),
        on_cell: Box::new(move |cell| {
            let line = report::lock_table::cell_line(cell);
            match &bar {
                Some(pb) => pb.println(line),
                None if !quiet => eprintln!("{line}"),
                None => {}
            }
        }),
    };
    // Switched back when this function returns, by any path.
    let _preempt = crate::switch::preempt(&a.preempt)?;
    let res = lockrun::run(spec, opts).map_err(|e| anyhow!(e))?;
    if let (Some(c), false) = (&res.costs, a.result.quiet) {
        let fault = res.fault_cost.as_ref().map(|f| f.ns_per_fault);
        eprintln!("{}", lab::lockbench::costs::line(c, fault));
    }
    let table = |md| {
        if md {
            report::lock_table::markdown(&res)
        } else {
            report::lock_table::render(&res)
        }
    };
    crate::term::print_result(a.result.format, &res, table, &out, a.result.quiet);
    if res.envelope.interrupted {
        eprintln!(
            "preemptlab: interrupted; the cells measured so far are in {}",
            out.display()
        );
        return Ok(lab::guard::interrupted_exit_code());
    }
    let failed: Vec<String> = res
        .cells
        .iter()
        .filter(|c| c.status == lockrun::Status::Failed)
        .map(|c| {
            format!(
                "{} {} {}w: {}",
                c.lock,
                c.pages,
                c.workers,
                c.reason.as_deref().unwrap_or("")
            )
        })
        .collect();
    if !failed.is_empty() {
        bail!("{} cells failed: {}", failed.len(), failed.join("; "));
    }
    Ok(0)
}
