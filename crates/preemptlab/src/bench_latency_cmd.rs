//! `preemptlab bench latency`.

use anyhow::{anyhow, bail, Result};
use lab::latency::{self, LatencyResult, Spec};
use lab::lockrun::{self, Status};

use crate::cli::BenchLatencyArgs;

use crate::cli::split_list as list;

pub fn run(a: BenchLatencyArgs) -> Result<i32> {
    let host = hostfacts::Host::live();
    let cpus = hostfacts::audit::kernel_facts(&host)
        .cpus
        .value
        .unwrap_or(1);
    let interval = lockrun::parse_duration(&a.interval).map_err(|e| anyhow!("--interval: {e}"))?;
    let duration = lockrun::parse_duration(&a.duration).map_err(|e| anyhow!("--duration: {e}"))?;
    let warm =
        lockrun::parse_duration(&a.load_warmup).map_err(|e| anyhow!("--load-warmup: {e}"))?;
    // A command given as a load may contain commas: only split the list when every entry is a keyword.
    let loads = {
        let parts = list(&a.load);
        if parts
            .iter()
            .all(|p| ["none", "lock", "hackbench"].contains(&p.as_str()))
        {
            parts
        } else {
            vec![a.load.trim().to_string()]
        }
    };
    let spec = Spec {
        policies: list(&a.policy),
        priority: a.priority,
        loads,
        threads: a.threads.unwrap_or(cpus),
        pin: !a.no_pin,
        interval_us: interval.as_micros() as u64,
        duration_s: duration.as_secs_f64(),
        load_warmup_s: warm.as_secs_f64(),
        repeat: a.repeat,
        no_deep_idle: !a.allow_deep_idle,
    };
    latency::validate(&spec).map_err(|e| anyhow!(e))?;
    if spec.loads.iter().any(|l| l == "hackbench") && lab::which("hackbench", &[]).is_none() {
        bail!("--load hackbench: no hackbench binary; apt-get install rt-tests");
    }
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| lab::result::default_path("bench-latency", lab::result::unix_now()));
    crate::term::claim_output(&out)?;
    let quiet = a.quiet;
    // Switched back when this function returns, by any path.
    let _preempt = crate::switch::preempt(&a.preempt)?;
    let res = latency::run(spec, &out, cpus, |c| {
        if !quiet {
            eprintln!("{}", cell_line(c));
        }
    })
    .map_err(|e| anyhow!(e))?;
    crate::term::print_result(a.format, &res, |md| table(&res, md), &out, a.quiet);
    Ok(if res.envelope.interrupted {
        lab::guard::interrupted_exit_code()
    } else {
        0
    })
}

fn cell_line(c: &latency::Cell) -> String {
    match &c.summary {
        Some(s) if c.status == Status::Ok => format!(
            "{:>5} load {:<9} p50 {:>7.1} us  p99 {:>8.1} us  p99.9 {:>8.1} us  max {:>8.1} us",
            c.policy, c.load, s.p50_us.median, s.p99_us.median, s.p999_us.median, s.max_us.median
        ),
        _ => format!(
            "{:>5} load {:<9} {:?}: {}",
            c.policy,
            c.load,
            c.status,
            c.reason.as_deref().unwrap_or("")
        ),
    }
}

fn table(r: &LatencyResult, md: bool) -> String {
    let h = &r.envelope.host;
    let mut rows = Vec::new();
    for c in &r.cells {
        let load = if c.load.chars().count() > 24 {
            format!("{}…", c.load.chars().take(23).collect::<String>())
        } else {
            c.load.clone()
        };
        match &c.summary {
            Some(s) if c.status == Status::Ok => {
                let min = c
                    .reps
                    .iter()
                    .map(|x| x.latency_us.min)
                    .fold(f64::INFINITY, f64::min);
                let over: u64 = c.reps.iter().map(|x| x.overruns).sum();
                rows.push(vec![
                    c.policy.clone(),
                    load,
                    c.threads.to_string(),
                    format!("{min:.1}"),
                    format!("{:.1}", s.p50_us.median),
                    format!("{:.1}", s.p99_us.median),
                    format!("{:.1}..{:.1}", s.p99_us.min, s.p99_us.max),
                    format!("{:.1}", s.p999_us.median),
                    format!("{:.1}", s.max_us.max),
                    over.to_string(),
                ])
            }
            _ => rows.push(report::markup::not_run_row(
                vec![c.policy.clone(), load, c.threads.to_string()],
                &c.status,
                5,
                c.reason.as_deref(),
            )),
        }
    }
    let header = [
        "policy",
        "load",
        "threads",
        "min us",
        "p50 us",
        "p99 us",
        "p99 range",
        "p99.9 us",
        "max us",
        "overruns",
    ];
    if md {
        return report::markup::markdown_table(&header, &rows, 2);
    }
    use report::markup::{columns, Align};
    let mut align = vec![Align::Left, Align::Left];
    align.extend((2..header.len()).map(|_| Align::Right));
    format!(
        "bench latency on {} (kernel {}, preemption {}, HZ {}, {} CPUs); interval {} us, {} x {} s per cell; medians over the repetitions (max: the largest)\n\n{}",
        h.hostname.value.as_deref().unwrap_or("?"),
        h.kernel.release.value.as_deref().unwrap_or("?"),
        h.kernel.preemption.model,
        h.kernel.hz.value.map(|x| x.to_string()).unwrap_or_else(|| "?".into()),
        h.kernel.cpus.value.unwrap_or(0),
        r.spec.interval_us,
        r.spec.repeat,
        r.spec.duration_s,
        columns(&header, &align, &rows, 0, 140)
    )
}
