//! `preemptlab diagnose`: the options checked, the window observed by the `diagnose` crate, the result
//! printed and written. A stop signal ends the window early; what was measured is still printed and
//! written, marked interrupted, and the exit code is the signal's.

use std::io::IsTerminal;

use anyhow::{anyhow, Result};
use clap::Args;
use report::export::Format;

use crate::cli::DiagnoseArgs;
use crate::term;

pub fn run(args: DiagnoseArgs) -> Result<i32> {
    match diagnose(&args) {
        Ok(code) => Ok(code),
        Err(e) => {
            // As the audit: a timer's textfile says the run failed rather than keeping old numbers;
            // not when writing that file is what failed (the one line says so already).
            if let (Format::Prometheus, Some(path)) = (args.format, &args.out) {
                if e.downcast_ref::<OutWrite>().is_none()
                    && osutil::output::check_publishable(path).is_ok()
                {
                    let text = report::diagnose_prom::render_failure(
                        env!("CARGO_PKG_VERSION"),
                        osutil::unix_now(),
                    );
                    if let Err(w) = osutil::output::publish(path, &text) {
                        osutil::msg!("preemptlab: {w}");
                    }
                }
            }
            Err(e)
        }
    }
}

/// Writing `--out` after the window failed (the disk filled, the directory went away): the error, which
/// no failure file follows.
#[derive(Debug)]
struct OutWrite(String);

impl std::fmt::Display for OutWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "--out {}", self.0)
    }
}

impl std::error::Error for OutWrite {}

/// The options checked (the window, the sampling rates), before anything is observed.
pub fn options(args: &DiagnoseArgs) -> Result<diagnose::Options> {
    let duration =
        hostfacts::duration::duration(&args.duration).map_err(|e| anyhow!("--duration {e}"))?;
    let mut opts = diagnose::Options::new(duration);
    opts.pids = distinct(&args.pid);
    opts.dsns = args.pg.clone();
    opts.cpu_clock_hz = args.frequency;
    opts.fault_period = args.fault_period;
    opts.fault_samples_max = args.fault_samples;
    opts.fault_counts_max = args.fault_counts;
    opts.scope = args.scope;
    opts.events = args.events;
    opts.switch_duty_pct = args.switch_duty;
    opts.cpu_duty_pct = args.cpu_duty;
    opts.control = args.control.clone();
    opts.check().map_err(|e| match e {
        diagnose::DiagnoseError::Duration { .. } => {
            anyhow!("--duration {}: the window must be 1s..24h", args.duration)
        }
        diagnose::DiagnoseError::Range { what, value, range } => {
            anyhow!("{} {value}: {range}", range_flag(what))
        }
        e => anyhow!(e),
    })?;
    Ok(opts)
}

/// The flag of the option a range error is about, as clap spells it (`--fault-period`): `diagnose`
/// names the setting in words ("fault period"); which field of [`DiagnoseArgs`] sets it is said here, once.
fn range_flag(what: &str) -> String {
    let field = match what {
        "frequency" => "frequency",
        "fault period" => "fault_period",
        "fault samples" => "fault_samples",
        "fault counts" => "fault_counts",
        "switch duty" => "switch_duty",
        "cpu duty" => "cpu_duty",
        other => return other.to_string(),
    };
    term::long_flag(
        DiagnoseArgs::augment_args(clap::Command::new("diagnose")),
        field,
    )
}

/// `pids` without repeats, in the order given: `--pid X --pid X` names one instance, observed once (it was
/// observed twice, its events counted twice over; issue 46 item 8).
fn distinct(pids: &[u32]) -> Vec<u32> {
    let mut seen = std::collections::BTreeSet::new();
    pids.iter().copied().filter(|p| seen.insert(*p)).collect()
}

fn diagnose(args: &DiagnoseArgs) -> Result<i32> {
    let opts = options(args)?;
    let duration = opts.duration;
    if let Some(path) = &args.out {
        term::check_published_out(path)?;
    }
    osutil::stop::install_signal_flag()?;
    let show = !args.quiet && std::io::stderr().is_terminal();
    let total = duration.as_secs_f64();
    let mut progress = |t: f64| {
        if t == 0.0 && !args.quiet {
            // Said once the events are open, so that a script can start its load on it.
            osutil::msg!("preemptlab diagnose: observing for {total:.0} s");
        } else if show {
            // A closed stderr drops the line (as osutil::msg! does), never the run.
            use std::io::Write;
            let _ = write!(
                std::io::stderr().lock(),
                "\rpreemptlab diagnose: {t:.0}/{total:.0} s observed"
            );
        }
    };
    let res = diagnose::run(
        &opts,
        hostfacts::envelope::envelope(results::Kind::Diagnose),
        &osutil::stop::interrupted,
        &mut progress,
    )
    .map_err(|e| match &e {
        diagnose::DiagnoseError::NoSuchProcess { .. }
        | diagnose::DiagnoseError::NotPostmaster { .. } => anyhow!("--pid {e}"),
        diagnose::DiagnoseError::Query(_) | diagnose::DiagnoseError::Remote { .. } => {
            anyhow!("--pg {e}")
        }
        _ => anyhow!(e),
    })?;
    if show {
        osutil::msg!();
    }
    for u in &res.unmeasured {
        osutil::msg!("preemptlab: not measured: {}: {}", u.what, u.why);
    }
    let text = term::render(args.format, Some(&args.color), &res)?;
    term::stdout(&text)?;
    if let Some(path) = &args.out {
        // As the audit: the file holds the format asked for, JSON for --format table.
        let file_text = match args.format {
            Format::Table => term::render(Format::Json, None, &res)?,
            _ => text,
        };
        osutil::output::publish(path, &file_text)
            .map_err(|e| OutWrite(term::out_flag(e).to_string()))?;
    }
    if res.envelope.interrupted {
        osutil::msg!("preemptlab: interrupted; the result covers the window observed so far");
        return Ok(osutil::stop::interrupted_exit_code());
    }
    for i in res.instances.iter().filter(|i| i.exited_at_s.is_some()) {
        osutil::msg!(
            "preemptlab: instance {} exited during the window: a partial result",
            i.postmaster_pid
        );
    }
    let fail = args.fail_on.is_some_and(|f| f.fails(&res));
    Ok(if fail { 1 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 46 item 8): `diagnose --pid X --pid X` measured the same instance twice.
    #[test]
    fn diagnose_pid_x_pid_x_measured_twice_regression() {
        assert_eq!(distinct(&[7, 3, 7, 3, 9]), vec![7, 3, 9]);
        assert_eq!(distinct(&[]), Vec::<u32>::new());
    }

    /// Every range error of the options names the flag as clap parses it (issue 47 item 7: the flags were
    /// made by replacing words in the library's message, so a renamed flag went unnoticed).
    #[test]
    fn range_errors_name_the_flags_clap_parses() {
        use clap::Parser;
        for (flag, bad) in [
            ("--frequency", "0"),
            ("--fault-period", "0"),
            ("--fault-samples", "2000000"),
            ("--fault-counts", "2000000000"),
            ("--switch-duty", "15"),
            ("--cpu-duty", "5"),
        ] {
            let cli =
                crate::cli::Cli::try_parse_from(["preemptlab", "diagnose", flag, bad]).unwrap();
            let crate::cli::Command::Diagnose(a) = cli.command else {
                unreachable!("parsed as diagnose")
            };
            let e = options(&a).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{flag} {bad}: ")), "{flag}: {e}");
        }
    }
}
