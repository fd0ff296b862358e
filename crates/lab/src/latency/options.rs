//! `bench latency`'s options as given, checked and resolved against the host into a `latency::Spec`.

use std::ops::RangeInclusive;
use std::time::Duration;

use axes::{Load, Policy};

use crate::options::{self, HostShape, OptionError};
use results::latency::Spec;

/// The wakeup intervals measured, us.
const INTERVAL_US: RangeInclusive<u64> = 50..=1_000_000;
/// The measuring threads.
const THREADS: RangeInclusive<u32> = 1..=4096;

/// `bench latency`'s options as given.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct LatencyOptions {
    /// Scheduling policies: other (SCHED_OTHER), fifo (SCHED_FIFO; root). Default: both where allowed.
    #[cfg_attr(feature = "cli", arg(long, default_value = "other,fifo"))]
    pub policy: String,
    /// SCHED_FIFO priority (1..99).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 90))]
    pub priority: i32,
    /// Background loads, measured one after the other: none, lock (bench lock, pg on 4 KB pages, 4x CPUs
    /// workers), hackbench, or a shell command.
    #[cfg_attr(feature = "cli", arg(long, default_value = "none,lock"))]
    pub load: String,
    /// Measuring threads (default: one per CPU, each pinned to its CPU).
    #[cfg_attr(feature = "cli", arg(long))]
    pub threads: Option<u32>,
    /// Do not pin the measuring threads.
    #[cfg_attr(feature = "cli", arg(long))]
    pub no_pin: bool,
    /// Wakeup interval (1ms, 200us).
    #[cfg_attr(feature = "cli", arg(long, default_value = "1ms"))]
    pub interval: String,
    /// Measured time per repetition.
    #[cfg_attr(feature = "cli", arg(long, default_value = "10s"))]
    pub duration: String,
    /// Repetitions per cell.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 3))]
    pub repeat: u32,
    /// Time the load runs before measuring.
    #[cfg_attr(feature = "cli", arg(long, default_value = "2s"))]
    pub load_warmup: String,
    /// Let idle CPUs enter deep idle states (by default /dev/cpu_dma_latency is held at 0 while measuring,
    /// as cyclictest does; the request ends when the tool exits).
    #[cfg_attr(feature = "cli", arg(long))]
    pub allow_deep_idle: bool,
}

impl LatencyOptions {
    /// Checks every option and resolves it against `host` (the threads default to its CPUs); a `hackbench`
    /// load needs the binary on PATH.
    pub fn spec(&self, host: &HostShape) -> Result<Spec, OptionError> {
        let us = Duration::from_micros;
        let interval = options::duration_in(
            "interval",
            &self.interval,
            us(*INTERVAL_US.start()),
            us(*INTERVAL_US.end()),
        )?;
        let duration =
            options::duration_at_least("duration", &self.duration, Duration::from_millis(100))?;
        let warmup = options::duration_at_least("load_warmup", &self.load_warmup, Duration::ZERO)?;
        let spec = Spec {
            policies: options::names::<Policy>("policy", &self.policy)?,
            priority: self.priority,
            loads: loads(&self.load),
            threads: self.threads.unwrap_or(host.cpus),
            pin: !self.no_pin,
            interval_us: interval.as_micros() as u64,
            duration_s: duration.as_secs_f64(),
            load_warmup_s: warmup.as_secs_f64(),
            repeat: self.repeat,
            no_deep_idle: !self.allow_deep_idle,
        };
        check(&spec)?;
        if spec.loads.contains(&Load::Hackbench) && osutil::which("hackbench", &[]).is_none() {
            return Err(OptionError::Invalid {
                option: "load",
                value: "hackbench".into(),
                why: "no hackbench binary; apt-get install rt-tests".into(),
            });
        }
        // A command the shell cannot find would exit 127 at once: refused before anything runs (issue 29).
        for cmd in spec.loads.iter().filter_map(|l| match l {
            Load::Command(c) => Some(c),
            _ => None,
        }) {
            if let Some(word) = missing_command(cmd) {
                return Err(OptionError::Invalid {
                    option: "load",
                    value: cmd.clone(),
                    why: format!(
                        "the shell finds no command {word} (give a command on PATH or a path that exists)"
                    ),
                });
            }
        }
        Ok(spec)
    }
}

/// The first word of the shell command `cmd` when `sh` cannot find it as a command (builtins, keywords
/// and PATH included); None when it can, or when the word is not a plain name (it holds quoting,
/// expansion or redirection, and only the shell knows what it becomes).
fn missing_command(cmd: &str) -> Option<String> {
    let word = cmd.split_whitespace().next()?;
    let plain = |c: char| c.is_alphanumeric() || "/._-+,:@%".contains(c);
    if !word.chars().all(plain) {
        return None;
    }
    let found = std::process::Command::new("sh")
        .args(["-c", "command -v -- \"$1\" >/dev/null", "sh", word])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        // No shell to ask: the load's own start will say what fails.
        .unwrap_or(true);
    (!found).then(|| word.to_string())
}

/// The loads of a list: split at commas only when every entry is a keyword, since a command may hold commas.
pub fn loads(s: &str) -> Vec<Load> {
    let parts = options::list(s);
    if parts.iter().all(|p| Load::KEYWORDS.contains(&p.as_str())) {
        parts.iter().map(|p| Load::parse(p)).collect()
    } else {
        vec![Load::parse(s.trim())]
    }
}

/// Checks a spec however it was made (`latency::run` checks the one it is given); errors name the options
/// by field.
pub fn check(s: &Spec) -> Result<(), OptionError> {
    let invalid = |option, value: String, why: &str| OptionError::Invalid {
        option,
        value,
        why: why.into(),
    };
    if s.policies.is_empty() || s.loads.is_empty() {
        return Err(OptionError::Empty {
            options: &["policy", "load"],
        });
    }
    if !(1..=99).contains(&s.priority) {
        return Err(invalid("priority", s.priority.to_string(), "1..99"));
    }
    if !INTERVAL_US.contains(&s.interval_us) {
        return Err(invalid(
            "interval",
            format!("{}us", s.interval_us),
            "50us..1s",
        ));
    }
    options::measured_seconds("duration", s.duration_s)?;
    if !THREADS.contains(&s.threads) {
        return Err(invalid("threads", s.threads.to_string(), "1..4096"));
    }
    options::repeat(s.repeat)?;
    if s.loads.iter().any(|l| l.name().trim().is_empty()) {
        return Err(OptionError::Whole {
            option: "load",
            why: "an empty command".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> LatencyOptions {
        LatencyOptions {
            policy: "other".into(),
            priority: 90,
            load: "none".into(),
            threads: None,
            no_pin: false,
            interval: "1ms".into(),
            duration: "300ms".into(),
            repeat: 1,
            load_warmup: "0".into(),
            allow_deep_idle: false,
        }
    }

    fn host() -> HostShape {
        HostShape {
            cpus: 3,
            mem_total_kib: None,
            huge_page_kib: 2048,
            root: false,
        }
    }

    #[test]
    fn resolves_against_the_host() {
        let s = opts().spec(&host()).unwrap();
        assert_eq!((s.threads, s.interval_us, s.duration_s), (3, 1000, 0.3));
        assert!(s.pin && s.no_deep_idle);
        assert_eq!(loads("none,lock"), vec![Load::Idle, Load::Lock]);
        assert_eq!(
            loads(" sleep 1,2 "),
            vec![Load::Command("sleep 1,2".into())]
        );
    }

    /// Regression (issue 29 item 5): `--load /nonexistent/cmd` ran, its shell exited 127, and the rows
    /// were reported as measured under it. A command the shell cannot find is refused before anything runs.
    #[test]
    fn a_load_the_shell_cannot_find_is_refused() {
        let flag = |o: &str| format!("--{}", o.replace('_', "-"));
        for bad in ["/nonexistent/cmd", "preemptlab-no-such-load --x"] {
            let mut o = opts();
            o.load = bad.into();
            let e = o.spec(&host()).unwrap_err().render(flag);
            let word = bad.split(' ').next().unwrap();
            assert!(
                e.contains(&format!("the shell finds no command {word}")),
                "{e}"
            );
        }
        // Builtins, keywords, PATH and words only the shell can expand are left to the shell.
        for good in [
            "sleep 1",
            "exit 3",
            "while :; do :; done",
            "$SHELL -c true",
            "'sleep' 1",
        ] {
            let mut o = opts();
            o.load = good.into();
            assert!(o.spec(&host()).is_ok(), "{good}");
        }
    }

    #[test]
    fn errors_name_the_field() {
        let flag = |o: &str| format!("--{}", o.replace('_', "-"));
        for (f, want) in [
            (
                Box::new(|o: &mut LatencyOptions| o.policy = "rr".into())
                    as Box<dyn Fn(&mut LatencyOptions)>,
                "--policy rr: expected other or fifo",
            ),
            (Box::new(|o| o.priority = 100), "--priority 100: 1..99"),
            (
                Box::new(|o| o.interval = "10us".into()),
                "--interval 10us: 50us..1s",
            ),
            (
                Box::new(|o| o.duration = "0".into()),
                "--duration 0: at least 100ms",
            ),
            (Box::new(|o| o.threads = Some(0)), "--threads 0: 1..4096"),
            (Box::new(|o| o.repeat = 0), "--repeat 0: 1..1000"),
            (
                Box::new(|o| o.load = ",".into()),
                "--policy and --load need at least one entry each",
            ),
        ] {
            let mut o = opts();
            f(&mut o);
            assert_eq!(o.spec(&host()).unwrap_err().render(flag), want);
        }
        let mut s = opts().spec(&host()).unwrap();
        s.interval_us = 10;
        assert_eq!(
            check(&s).unwrap_err().to_string(),
            "interval 10us: 50us..1s"
        );
    }
}
