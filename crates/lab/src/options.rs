//! The benches' options as a person gives them (lists, counts and durations as text), checked and turned into
//! typed specs before any work starts: each bench's `options` (`lock::options` for `bench lock`,
//! `pg::options`, `latency::options`, `net::options`), `simrun::options` for `sim`.
//!
//! Errors name an option by its field name (`reconnect_every`), never by a command-line flag: a caller says
//! how options are named where it takes them (`OptionError::render`), so the command line's one-line
//! message reads `--reconnect-every ...` while a library caller sees the field.

use std::time::Duration;

use axes::{Count, Named};

/// What the bench needs to know about the machine to resolve its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostShape {
    /// Online CPUs (what `4x` multiplies).
    pub cpus: u32,
    /// Total RAM, KiB, when known.
    pub mem_total_kib: Option<u64>,
    /// The kernel's default huge page size, KiB (2048 when unknown).
    pub huge_page_kib: u64,
    /// Whether this process runs as root.
    pub root: bool,
}

impl HostShape {
    /// This machine.
    pub fn live() -> HostShape {
        let host = hostfacts::Host::live();
        let mem = hostfacts::audit::memory_facts(&host);
        HostShape {
            cpus: hostfacts::audit::kernel_facts(&host)
                .cpus
                .value
                .unwrap_or(1),
            mem_total_kib: mem.total_kib.value,
            huge_page_kib: mem.default_huge_page_kib.value.unwrap_or(2048),
            root: osutil::is_root(),
        }
    }
}

/// Why an option is refused. `option` fields hold the option's field name.
#[derive(Debug, thiserror::Error)]
pub enum OptionError {
    /// A value that does not parse or is out of range.
    #[error("{option} {value}: {why}")]
    Invalid {
        /// The option.
        option: &'static str,
        /// The value as given.
        value: String,
        /// What is wrong and what would do.
        why: String,
    },
    /// The option as a whole (an empty list, a value that does not parse at all).
    #[error("{option}: {why}")]
    Whole {
        /// The option.
        option: &'static str,
        /// What is wrong and what would do.
        why: String,
    },
    /// A duration that does not parse.
    #[error("{option}: {err}")]
    Duration {
        /// The option.
        option: &'static str,
        /// Why.
        err: DurationError,
    },
    /// Options that each need at least one entry, one of them empty.
    #[error("{} need at least one entry each", list_names(.options, |o| o.to_string()))]
    Empty {
        /// The options, as a group.
        options: &'static [&'static str],
    },
    /// An extra setting that is not `name=value`.
    #[error("{option} {value}: expected name=value, e.g. {option} work_mem=16MB")]
    NotNameValue {
        /// The option.
        option: &'static str,
        /// The value as given.
        value: String,
    },
    /// An option that goes only with another one's value.
    #[error("{option} needs {other} {other_value} ({why})")]
    Needs {
        /// The option.
        option: &'static str,
        /// The option it needs.
        other: &'static str,
        /// The value that one needs.
        other_value: &'static str,
        /// Why.
        why: &'static str,
    },
    /// Two options that exclude each other.
    #[error("{option} {why}: it cannot be combined with {other}")]
    Excludes {
        /// The option.
        option: &'static str,
        /// The other.
        other: &'static str,
        /// Why.
        why: &'static str,
    },
    /// A setting the bench makes itself, given as an extra one.
    #[error("{option} {name}: set by the bench itself (use {} / {})", .instead[0], .instead[1])]
    SetByBench {
        /// The option the extra settings came in.
        option: &'static str,
        /// The setting.
        name: String,
        /// The options that set it.
        instead: [&'static str; 2],
    },
    /// An option that changes the host and needs root.
    #[error("{option} {does}: run as root, or {fix}")]
    NeedsRoot {
        /// The option.
        option: &'static str,
        /// What it does.
        does: &'static str,
        /// What to do without root.
        fix: &'static str,
    },
    /// PostgreSQL's binaries could not be found or asked.
    #[error("{option} {source}")]
    PgBin {
        /// The option that names their directory.
        option: &'static str,
        /// Why.
        source: hostfacts::pgbin::PgBinError,
    },
}

impl OptionError {
    /// The message with every option named by `name` (the command line passes its flag spelling).
    pub fn render(&self, name: impl Fn(&str) -> String) -> String {
        use hostfacts::pgbin::PgBinError;
        match self {
            OptionError::Invalid { option, value, why } => {
                format!("{} {value}: {why}", name(option))
            }
            OptionError::Whole { option, why } => format!("{}: {why}", name(option)),
            OptionError::Duration { option, err } => format!("{}: {err}", name(option)),
            OptionError::Empty { options } => {
                format!(
                    "{} need at least one entry each",
                    list_names(options, &name)
                )
            }
            OptionError::NotNameValue { option, value } => {
                let o = name(option);
                format!("{o} {value}: expected name=value, e.g. {o} work_mem=16MB")
            }
            OptionError::Needs {
                option,
                other,
                other_value,
                why,
            } => format!(
                "{} needs {} {other_value} ({why})",
                name(option),
                name(other)
            ),
            OptionError::Excludes { option, other, why } => format!(
                "{} {why}: it cannot be combined with {}",
                name(option),
                name(other)
            ),
            OptionError::SetByBench {
                option,
                name: setting,
                instead,
            } => format!(
                "{} {setting}: set by the bench itself (use {} / {})",
                name(option),
                name(instead[0]),
                name(instead[1])
            ),
            OptionError::NeedsRoot { option, does, fix } => {
                format!("{} {does}: run as root, or {fix}", name(option))
            }
            OptionError::PgBin {
                option,
                source: e @ PgBinError::NotFound,
            } => format!("{e} ({} DIR)", name(option)),
            OptionError::PgBin { option, source } => format!("{} {source}", name(option)),
        }
    }
}

/// `a and b`, `a, b and c`.
fn list_names(options: &[&str], name: impl Fn(&str) -> String) -> String {
    let names: Vec<String> = options.iter().map(|o| name(o)).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// Splits a comma-separated list into its non-empty, trimmed entries.
pub fn list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect()
}

use hostfacts::duration::{duration, DurationError};

/// The duration option `option`, at least `min`.
pub fn duration_at_least(
    option: &'static str,
    s: &str,
    min: Duration,
) -> Result<Duration, OptionError> {
    duration_in(option, s, min, Duration::MAX)
}

/// The duration option `option`, from `min` to `max` (`Duration::MAX`: no bound of its own).
pub fn duration_in(
    option: &'static str,
    s: &str,
    min: Duration,
    max: Duration,
) -> Result<Duration, OptionError> {
    let d = duration(s).map_err(|err| OptionError::Duration { option, err })?;
    if d < min || d > max {
        let why = match max {
            Duration::MAX => format!("at least {}", human_duration(min)),
            _ => format!("{}..{}", human_duration(min), human_duration(max)),
        };
        return Err(OptionError::Invalid {
            option,
            value: s.into(),
            why,
        });
    }
    Ok(d)
}

/// `1s`, `100ms`, `50us`, `0s`: how the bounds read in messages.
fn human_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else if d.subsec_micros().is_multiple_of(1000) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}us", d.as_micros())
    }
}

/// Counts given as numbers or multiples of the CPUs (`8`, `4x`), each 1..=`max` `what`: the entries as
/// given and as resolved.
pub fn counts(
    option: &'static str,
    what: &str,
    s: &str,
    cpus: u32,
    max: u32,
) -> Result<(Vec<Count>, Vec<u32>), OptionError> {
    let mut given = Vec::new();
    let mut out = Vec::new();
    for w in s.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let c = Count::parse(w).map_err(|_| OptionError::Invalid {
            option,
            value: w.into(),
            why: "expected a number or a multiple of CPUs like 4x".into(),
        })?;
        let n = c.resolve(cpus);
        if n == 0 || n > max {
            return Err(OptionError::Invalid {
                option,
                value: w.into(),
                why: format!("must be 1..{max} {what}"),
            });
        }
        given.push(c);
        out.push(n);
    }
    if out.is_empty() {
        return Err(OptionError::Whole {
            option,
            why: "empty list".into(),
        });
    }
    Ok((given, out))
}

/// The value of a closed set (`axes`) the option names, or the option refused with the names there are
/// (`--policy rr: expected other or fifo`).
pub fn name<T: Named>(option: &'static str, s: &str) -> Result<T, OptionError> {
    T::from_name(s).ok_or_else(|| OptionError::Invalid {
        option,
        value: s.into(),
        why: format!("expected {}", T::expected()),
    })
}

/// The values of a comma-separated list of names (`other,fifo`), each as [`name`] takes it.
pub fn names<T: Named>(option: &'static str, s: &str) -> Result<Vec<T>, OptionError> {
    list(s).iter().map(|x| name(option, x)).collect()
}

/// A bench's measured time per repetition, seconds, as a spec holds it: 100 ms to 24 h.
pub fn measured_seconds(option: &'static str, secs: f64) -> Result<f64, OptionError> {
    if !(0.1..=86_400.0).contains(&secs) {
        return Err(OptionError::Invalid {
            option,
            value: format!("{secs}s"),
            why: "100ms..24h".into(),
        });
    }
    Ok(secs)
}

/// A repetition count, 1..=1000.
pub fn repeat(n: u32) -> Result<u32, OptionError> {
    if n == 0 || n > 1000 {
        return Err(OptionError::Invalid {
            option: "repeat",
            value: n.to_string(),
            why: "1..1000".into(),
        });
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_durations() {
        assert_eq!(
            counts("workers", "workers", "1x,4x,8", 2, 100).unwrap().1,
            vec![2, 8, 8]
        );
        assert!(counts("workers", "workers", "0", 2, 100).is_err());
        assert!(counts("workers", "workers", "lots", 2, 100).is_err());
        assert!(counts("workers", "workers", "5000", 2, 100).is_err());
        let flag = |o: &str| format!("--{}", o.replace('_', "-"));
        let ms = Duration::from_millis;
        assert_eq!(
            duration_at_least("warmup", "2m", ms(0)).unwrap(),
            ms(120_000)
        );
        let e = duration_at_least("load_warmup", "soon", ms(0)).unwrap_err();
        assert_eq!(
            e.render(flag),
            "--load-warmup: \"soon\" is not a duration (expected e.g. 3s, 500ms, 2m, 1h)"
        );
        let e = duration_at_least("duration", "1ms", ms(100)).unwrap_err();
        assert_eq!(e.render(flag), "--duration 1ms: at least 100ms");
        let e = duration_in("interval", "10us", Duration::from_micros(50), ms(1000));
        assert_eq!(e.unwrap_err().render(flag), "--interval 10us: 50us..1s");
    }

    #[test]
    fn messages_name_options_as_the_caller_does() {
        let e = OptionError::Excludes {
            option: "reconnect_every",
            other: "threads",
            why: "replaces worker processes",
        };
        assert_eq!(
            e.render(|o| format!("--{}", o.replace('_', "-"))),
            "--reconnect-every replaces worker processes: it cannot be combined with --threads"
        );
        assert_eq!(
            e.to_string(),
            "reconnect_every replaces worker processes: it cannot be combined with threads"
        );
        let e = OptionError::Empty {
            options: &["huge_pages", "shared_buffers", "clients"],
        };
        assert_eq!(
            e.render(|o| format!("--{}", o.replace('_', "-"))),
            "--huge-pages, --shared-buffers and --clients need at least one entry each"
        );
    }
}
