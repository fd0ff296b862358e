//! `bench pg`'s options as given, checked and resolved into a `pg::run::Spec` before any cluster or pool is
//! touched. Extra server settings are checked against the names the PostgreSQL binaries the bench will use
//! know (`postgres --describe-config`), so a misspelt one is refused up front, not after initdb.

use std::path::Path;
use std::time::Duration;

use hostfacts::pgbin::BinDir;

use crate::options::{self, HostShape, OptionError};
use axes::{Driver, HugePages, Protocol};
use pgharness::pgdriver::Drive;
use results::pg::{Build, Cell, PgResult, Spec};
use results::Status;

/// The names of a closed set as the command line offers them (`[possible values: ...]`).
#[cfg(feature = "cli")]
fn possible<T: axes::Named>() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(T::all().iter().map(|v| v.name()))
}

/// Settings the bench makes itself for every server.
const BENCH_SETTINGS: [&str; 5] = [
    "shared_buffers",
    "huge_pages",
    "port",
    "listen_addresses",
    "unix_socket_directories",
];

/// `bench pg`'s options as given.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct PgOptions {
    /// huge_pages settings: off, on, try (comma-separated).
    #[cfg_attr(feature = "cli", arg(long, default_value = "off,on"))]
    pub huge_pages: String,
    /// Client counts: numbers or multiples of the CPU count (16x).
    #[cfg_attr(feature = "cli", arg(long, default_value = "16x"))]
    pub clients: String,
    /// shared_buffers sizes (comma-separated, e.g. 1GB,4GB).
    #[cfg_attr(feature = "cli", arg(long, default_value = "2GB"))]
    pub shared_buffers: String,
    /// Scale: pgbench's scaling factor (100 = 10 M accounts, about 1.5 GB); sysbench gets as many rows.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 100))]
    pub scale: u32,
    /// pgbench: select-only, simple-update, tpcb-like or a script FILE; sysbench: oltp_point_select,
    /// oltp_read_only, oltp_read_write or a .lua FILE (default: select-only / oltp_point_select).
    #[cfg_attr(feature = "cli", arg(long))]
    pub script: Option<String>,
    /// The load driver.
    #[cfg_attr(feature = "cli", arg(long, default_value = "pgbench", value_parser = possible::<Driver>()))]
    pub driver: String,
    /// Put a pooler between the clients and the server (persistent server connections, as in docs/references.md#page-table-cost).
    #[cfg_attr(feature = "cli", arg(long, value_parser = possible::<axes::Pooler>()))]
    pub pooler: Option<String>,
    /// Query protocol.
    #[cfg_attr(feature = "cli", arg(long, default_value = "prepared", value_parser = possible::<Protocol>()))]
    pub protocol: String,
    /// A new connection per transaction (pgbench -C): fresh backends and page tables all the time.
    #[cfg_attr(feature = "cli", arg(long))]
    pub reconnect: bool,
    /// Load every table and index into shared_buffers with pg_prewarm after each server start.
    #[cfg_attr(feature = "cli", arg(long))]
    pub prewarm: bool,
    /// Observe the cluster with `diagnose` during each measured run (root: perf events); the diagnosis
    /// (spinlock share, segment faults, preemptions inside faults) goes into the run's record.
    #[cfg_attr(feature = "cli", arg(long))]
    pub diagnose: bool,
    /// Measured time per run, whole seconds (10s, 1m).
    #[cfg_attr(feature = "cli", arg(long, default_value = "10s"))]
    pub duration: String,
    /// Warm-up per run (a separate driver run just before; 0 for none).
    #[cfg_attr(feature = "cli", arg(long, default_value = "5s"))]
    pub warmup: String,
    /// Rounds: each runs every configuration once.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 3))]
    pub repeat: u32,
    /// Driver threads (pgbench -j; default: the CPU count).
    #[cfg_attr(feature = "cli", arg(long))]
    pub threads: Option<u32>,
    /// Fraction of transactions pgbench logs for the latency percentiles (0 = none).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 0.1))]
    pub latency_sample: f64,
    /// Extra server setting, name=value (repeatable).
    #[cfg_attr(feature = "cli", arg(long = "set", value_name = "NAME=VALUE"))]
    pub set: Vec<String>,
    /// Seconds between /proc samples of the cluster.
    #[cfg_attr(feature = "cli", arg(long, default_value = "1s"))]
    pub sample_interval: String,
    /// When to read the cluster's Pss: once near the end of each run, in every sample, or never.
    /// Reading it walks every backend's page tables (about 0.5 s of CPU per pass at 32 backends on 2 GB of
    /// 4 KB-page buffers, measured), which lowers the TPS being measured when done every second.
    #[cfg_attr(feature = "cli", arg(long, default_value = "end", value_parser = possible::<axes::PssWhen>()))]
    pub pss: String,
    /// PostgreSQL builds, comma-separated: bin directories, or builds of scripts/pg-build by name (18,
    /// 18+rseq-spinlock; docs/pg-builds.md). Several are one more axis, interleaved in every round.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DIR|NAME,..."))]
    pub pg_bin: Option<String>,
    /// Grow the hugetlb pool to what each configuration's server needs (its own
    /// shared_memory_size_in_huge_pages plus 2%) (root); restored after each, also on Ctrl-C.
    #[cfg_attr(feature = "cli", arg(long))]
    pub reserve_hugepages: bool,
}

fn invalid(option: &'static str, value: impl Into<String>, why: impl Into<String>) -> OptionError {
    OptionError::Invalid {
        option,
        value: value.into(),
        why: why.into(),
    }
}

/// A duration the drivers take in whole seconds, at least `min`.
fn whole_seconds(option: &'static str, s: &str, min: u64) -> Result<u64, OptionError> {
    let d =
        hostfacts::duration::duration(s).map_err(|err| OptionError::Duration { option, err })?;
    if d.subsec_nanos() != 0 {
        return Err(invalid(
            option,
            s,
            "pgbench and sysbench count whole seconds (e.g. 10s, 1m)",
        ));
    }
    if d.as_secs() < min {
        return Err(invalid(option, s, format!("at least {min}s")));
    }
    Ok(d.as_secs())
}

/// `name=value` pairs with plausible names.
fn settings(set: &[String]) -> Result<Vec<(String, String)>, OptionError> {
    let mut out = Vec::new();
    for s in set {
        let Some((k, v)) = s.split_once('=') else {
            return Err(OptionError::NotNameValue {
                option: "set",
                value: s.clone(),
            });
        };
        let k = k.trim();
        if k.is_empty()
            || !k
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        {
            return Err(invalid("set", s, format!("{k:?} is not a setting name")));
        }
        if BENCH_SETTINGS.contains(&k) {
            return Err(OptionError::SetByBench {
                option: "set",
                name: k.into(),
                instead: ["shared_buffers", "huge_pages"],
            });
        }
        out.push((k.to_string(), v.trim().to_string()));
    }
    Ok(out)
}

/// Refuses a setting `bin`'s server does not know. Names with a dot are extensions' own (placeholders the
/// server accepts before the extension loads), so only plain names are checked.
pub fn check_setting_names(settings: &[(String, String)], bin: &BinDir) -> Result<(), OptionError> {
    let plain: Vec<&(String, String)> = settings.iter().filter(|(k, _)| !k.contains('.')).collect();
    if plain.is_empty() {
        return Ok(());
    }
    let known = bin.setting_names().map_err(|source| OptionError::PgBin {
        option: "pg_bin",
        source,
    })?;
    for (k, v) in plain {
        if !known.contains(&k.to_ascii_lowercase()) {
            let version = bin.major.map(|m| format!(" {m}")).unwrap_or_default();
            return Err(invalid(
                "set",
                format!("{k}={v}"),
                format!(
                    "PostgreSQL{version} has no setting {k:?}; check the spelling (`{} --describe-config` lists them)",
                    bin.dir.join("postgres").display()
                ),
            ));
        }
    }
    Ok(())
}

impl PgOptions {
    /// Checks every option, finds the binaries and resolves the rest against `host`. Touches nothing: no
    /// cluster, no pool.
    pub fn spec(&self, host: &HostShape) -> Result<Spec, OptionError> {
        let (clients_given, clients) =
            options::counts("clients", "clients", &self.clients, host.cpus, 5000)?;
        let duration_s = whole_seconds("duration", &self.duration, 1)?;
        let warmup_s = whole_seconds("warmup", &self.warmup, 0)?;
        let sample = options::duration_at_least(
            "sample_interval",
            &self.sample_interval,
            Duration::from_millis(100),
        )?;
        let settings = settings(&self.set)?;
        let driver: Driver = options::name("driver", &self.driver)?;
        let script = self.script.clone().unwrap_or_else(|| {
            match driver {
                Driver::Pgbench => "select-only",
                Driver::Sysbench => "oltp_point_select",
            }
            .to_string()
        });
        let found =
            crate::pg::builds::find(self.pg_bin.as_deref(), &crate::pg::builds::cache_dir())?;
        let builds: Vec<Build> = found.iter().map(crate::pg::builds::describe).collect();
        let threads = match self.threads {
            Some(0) => {
                return Err(invalid(
                    "threads",
                    "0",
                    "pgbench needs at least one thread (default: one per CPU)",
                ))
            }
            Some(n) => n,
            None => host.cpus.max(1),
        };
        let mut spec = Spec {
            huge_pages: options::names("huge_pages", &self.huge_pages)?,
            shared_buffers: options::list(&self.shared_buffers),
            clients_given,
            clients,
            scale: self.scale,
            script,
            script_text: None,
            driver,
            pooler: match &self.pooler {
                Some(p) => Some(options::name("pooler", p)?),
                None => None,
            },
            protocol: options::name("protocol", &self.protocol)?,
            reconnect: self.reconnect,
            prewarm: self.prewarm,
            diagnose: self.diagnose,
            duration_s,
            warmup_s,
            repeat: self.repeat,
            threads,
            latency_sample: self.latency_sample,
            settings,
            huge_page_kib: host.huge_page_kib,
            pg_bin: builds
                .iter()
                .map(|b| b.bin_dir.as_str())
                .collect::<Vec<_>>()
                .join(","),
            pg_version: None,
            builds,
            sample_interval_s: sample.as_secs_f64(),
            pss: options::name("pss", &self.pss)?,
        };
        spec.script_text = validate(&spec, host.mem_total_kib)?;
        for f in &found {
            check_setting_names(&spec.settings, &f.bin)?;
        }
        if spec.huge_pages.iter().any(|&h| h != HugePages::Off)
            && self.reserve_hugepages
            && !host.root
        {
            return Err(crate::lock::options::NEEDS_ROOT);
        }
        Ok(spec)
    }
}

/// Checks values the matrix would otherwise reject late: settings, sizes, scripts, the driver, and that
/// the configurations fit in memory. Returns the script's text when it is a file.
pub fn validate(spec: &Spec, mem_total_kib: Option<u64>) -> Result<Option<String>, OptionError> {
    if spec.huge_pages.is_empty() || spec.shared_buffers.is_empty() || spec.clients.is_empty() {
        return Err(OptionError::Empty {
            options: &["huge_pages", "shared_buffers", "clients"],
        });
    }
    for sb in &spec.shared_buffers {
        let b = results::host::bytes::size(sb)
            .map_err(|e| invalid("shared_buffers", sb, format!("{e} (e.g. 2GB, 512MB)")))?;
        if b.0 < 1 << 20 {
            return Err(invalid("shared_buffers", sb, "at least 1MB"));
        }
        if let Some(total) = mem_total_kib {
            if b.0 / 1024 > total / 2 {
                return Err(invalid(
                    "shared_buffers",
                    sb,
                    format!(
                        "more than half of this host's {} MiB of RAM; choose a smaller size",
                        total / 1024
                    ),
                ));
            }
        }
    }
    if spec.scale == 0 || spec.scale > 100_000 {
        return Err(invalid("scale", spec.scale.to_string(), "1..100000"));
    }
    if spec.duration_s == 0 {
        return Err(OptionError::Whole {
            option: "duration",
            why: "at least 1s (the drivers count whole seconds)".into(),
        });
    }
    options::repeat(spec.repeat)?;
    if !(0.0..=1.0).contains(&spec.latency_sample) {
        return Err(invalid(
            "latency_sample",
            spec.latency_sample.to_string(),
            "a fraction from 0 to 1",
        ));
    }
    settings(
        &spec
            .settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>(),
    )?;
    let driver = spec.driver;
    if driver == Driver::Sysbench {
        if spec.reconnect {
            return Err(OptionError::Needs {
                option: "reconnect",
                other: "driver",
                other_value: "pgbench",
                why: "sysbench keeps its connections",
            });
        }
        if spec.protocol == Protocol::Extended {
            return Err(invalid(
                "protocol",
                "extended",
                "sysbench has prepared or simple",
            ));
        }
    }
    if driver.builtins().contains(&spec.script.as_str()) {
        return Ok(None);
    }
    let looks_like_file = spec.script.contains('/') || spec.script.contains('.');
    if !looks_like_file {
        let why = format!(
            "not a built-in {} script ({}) nor a file path",
            spec.driver,
            driver.builtins().join(", ")
        );
        return Err(invalid("script", &spec.script, why));
    }
    let text = std::fs::read_to_string(Path::new(&spec.script))
        .map_err(|e| invalid("script", &spec.script, osutil::explain_io_error(&e)))?;
    if text.trim().is_empty() {
        return Err(invalid("script", &spec.script, "the file is empty"));
    }
    Ok(Some(text))
}

/// The failed cells of a result, one `sb S hp H c N: reason` each.
pub fn failures(res: &PgResult) -> Vec<String> {
    let failed = res.cells.iter().filter(|c| c.status == Status::Failed);
    failed
        .map(|c: &Cell| {
            let why = c.reason.as_deref().unwrap_or("");
            format!(
                "sb {} hp {} c {}: {why}",
                c.shared_buffers, c.huge_pages, c.clients
            )
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use axes::{Pooler, PssWhen};

    /// A small spec for the tests here and in `pg::run`.
    pub(crate) fn spec() -> Spec {
        Spec {
            huge_pages: vec![HugePages::Off, HugePages::On],
            shared_buffers: vec!["128MB".into()],
            clients_given: vec![axes::Count::Exact(4)],
            clients: vec![4],
            scale: 1,
            script: "select-only".into(),
            script_text: None,
            driver: Driver::Pgbench,
            pooler: None,
            protocol: Protocol::Prepared,
            reconnect: false,
            prewarm: false,
            diagnose: false,
            duration_s: 1,
            warmup_s: 0,
            repeat: 1,
            threads: 2,
            latency_sample: 0.1,
            settings: vec![],
            huge_page_kib: 2048,
            pg_bin: "/usr/lib/postgresql/15/bin".into(),
            pg_version: None,
            builds: vec![],
            sample_interval_s: 1.0,
            pss: PssWhen::End,
        }
    }

    fn flag(option: &str) -> String {
        format!("--{}", option.replace('_', "-"))
    }

    #[test]
    fn validation_names_the_option() {
        assert_eq!(validate(&spec(), Some(1 << 24)).unwrap(), None);
        type Change = Box<dyn Fn(&mut Spec)>;
        let cases: Vec<(Change, &str)> = vec![
            (
                Box::new(|s| s.shared_buffers = vec!["lots".into()]),
                "--shared-buffers lots",
            ),
            (
                Box::new(|s| s.shared_buffers = vec!["64GB".into()]),
                "more than half",
            ),
            (Box::new(|s| s.scale = 0), "--scale 0"),
            (
                Box::new(|s| s.script = "select-everything".into()),
                "not a built-in pgbench script",
            ),
            (
                Box::new(|s| s.script = "/nonexistent/x.sql".into()),
                "--script /nonexistent/x.sql",
            ),
            (
                Box::new(|s| s.settings = vec![("huge_pages".into(), "on".into())]),
                "--set huge_pages: set by the bench itself (use --shared-buffers / --huge-pages)",
            ),
            (
                Box::new(|s| {
                    s.driver = Driver::Sysbench;
                    s.script = "oltp_point_select".into();
                    s.reconnect = true
                }),
                "--reconnect needs --driver pgbench",
            ),
        ];
        for (change, want) in cases {
            let mut s = spec();
            change(&mut s);
            let e = validate(&s, Some(1 << 24)).unwrap_err().render(flag);
            assert!(e.contains(want), "{e} should contain {want}");
        }
        let mut s = spec();
        s.driver = Driver::Sysbench;
        s.script = "oltp_read_write".into();
        assert_eq!(validate(&s, Some(1 << 24)).unwrap(), None);
    }

    #[test]
    fn names_are_refused_with_the_names_there_are() {
        let e = options::names::<HugePages>("huge_pages", "off,maybe").unwrap_err();
        assert_eq!(
            e.render(flag),
            "--huge-pages maybe: expected off, on or try"
        );
        let e = options::name::<Protocol>("protocol", "fast").unwrap_err();
        assert_eq!(
            e.render(flag),
            "--protocol fast: expected simple, extended or prepared"
        );
        let e = options::name::<Driver>("driver", "hammerdb").unwrap_err();
        assert_eq!(
            e.render(flag),
            "--driver hammerdb: expected pgbench or sysbench"
        );
        let e = options::name::<Pooler>("pooler", "odyssey").unwrap_err();
        assert_eq!(e.render(flag), "--pooler odyssey: expected pgbouncer");
        let e = options::name::<PssWhen>("pss", "sometimes").unwrap_err();
        assert_eq!(
            e.render(flag),
            "--pss sometimes: expected end, every or never"
        );
    }

    #[test]
    fn unknown_setting_names_are_refused_by_the_servers_own_list() {
        let Ok(bin) = hostfacts::pgbin::find(None, None) else {
            osutil::msg!(
                "no PostgreSQL binaries here: the setting-name check is covered by bad_input"
            );
            return;
        };
        let ok = vec![
            ("work_mem".to_string(), "16MB".to_string()),
            ("Max_Connections".into(), "50".into()),
            ("myext.knob".into(), "1".into()),
        ];
        check_setting_names(&ok, &bin).unwrap();
        let bad = vec![("nosuch_guc".to_string(), "1".to_string())];
        let e = check_setting_names(&bad, &bin).unwrap_err().render(flag);
        assert!(e.starts_with("--set nosuch_guc=1: PostgreSQL"), "{e}");
        assert!(e.contains("check the spelling"), "{e}");
        assert!(e.contains("--describe-config"), "{e}");
    }
}
