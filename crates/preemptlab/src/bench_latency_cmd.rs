//! `preemptlab bench latency`.

use anyhow::{anyhow, bail, Result};
use lab::latency::{self, Spec};
use lab::lockrun;

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
        .result
        .out
        .clone()
        .unwrap_or_else(|| lab::result::default_path("bench-latency", lab::result::unix_now()));
    crate::term::claim_output(&out)?;
    let quiet = a.result.quiet;
    // Switched back when this function returns, by any path.
    let _preempt = crate::switch::preempt(&a.preempt)?;
    let res = latency::run(spec, &out, cpus, |c| {
        if !quiet {
            eprintln!("{}", report::latency_table::cell_line(c));
        }
    })
    .map_err(|e| anyhow!(e))?;
    crate::term::print_result(
        a.result.format,
        &res,
        |md| report::latency_table::render(&res, md),
        &out,
        a.result.quiet,
    );
    Ok(if res.envelope.interrupted {
        lab::guard::interrupted_exit_code()
    } else {
        0
    })
}
