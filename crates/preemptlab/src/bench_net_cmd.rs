//! `preemptlab bench net`.

use anyhow::{anyhow, Result};
use lab::lockrun;
use lab::net::{self, Spec};

use crate::cli::BenchNetArgs;

use crate::cli::split_list as list;

pub fn run(a: BenchNetArgs) -> Result<i32> {
    let duration = lockrun::parse_duration(&a.duration).map_err(|e| anyhow!("--duration: {e}"))?;
    let sizes = list(&a.msg_sizes)
        .iter()
        .map(|s| net::parse_size(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("--msg-sizes {e}"))?;
    let spec = Spec {
        tests: list(&a.tests),
        msg_sizes: sizes,
        streams: a.streams,
        duration_s: duration.as_secs_f64(),
        repeat: a.repeat,
        netns: a.netns,
    };
    net::validate(&spec).map_err(|e| anyhow!(e))?;
    if spec.netns && !hostfacts::host::is_root() {
        return Err(anyhow!(
            "--netns creates a network namespace and a veth pair: run as root, or leave it out for loopback"
        ));
    }
    let out = a
        .result
        .out
        .clone()
        .unwrap_or_else(|| lab::result::default_path("bench-net", lab::result::unix_now()));
    crate::term::claim_output(&out)?;
    let quiet = a.result.quiet;
    // Switched back when this function returns, by any path.
    let _preempt = crate::switch::preempt(&a.preempt)?;
    let res = net::run(spec, &out, |c| {
        if !quiet {
            eprintln!("{}", report::net_table::row(c).join("  "));
        }
    })
    .map_err(|e| anyhow!(e))?;
    crate::term::print_result(
        a.result.format,
        &res,
        |md| report::net_table::render(&res, md),
        &out,
        a.result.quiet,
    );
    Ok(if res.envelope.interrupted {
        lab::guard::interrupted_exit_code()
    } else {
        0
    })
}
