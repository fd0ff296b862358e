//! The load generators `bench pg` drives: pgbench (from the server's own bin directory) and sysbench 1.0's
//! OLTP tests. Each [`Driver`] knows its built-in scripts, its command lines (data load and run), how to
//! read its progress lines and summary, and where its latencies come from (pgbench: its summary's mean and
//! stddev plus percentiles from its sampled per-transaction log; sysbench: its summary's mean, max and
//! 99th percentile).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use osutil::child::{Child, ChildError, Ended};

use hostfacts::pgbin::BinDir;

use crate::pgcluster::Cluster;
use axes::Driver;
use axes::Protocol;
use results::pg::Sampled;
use results::pg::{Latency, Point, Rep, SegmentCheck, Spec};

/// The database the benchmark tables live in.
pub const DB: &str = "bench";

/// pgbench's built-in scripts.
pub const PGBENCH_BUILTINS: [&str; 3] = ["select-only", "simple-update", "tpcb-like"];
/// sysbench's OLTP tests this bench drives.
pub const SYSBENCH_TESTS: [&str; 3] = ["oltp_point_select", "oltp_read_only", "oltp_read_write"];

/// A driver's binary that is not installed; the message names the package.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MissingDriver {
    /// No pgbench beside the server's binaries.
    #[error("no pgbench in {}: apt-get install postgresql-client-{major}", .dir.display())]
    Pgbench {
        /// The server's bin directory.
        dir: PathBuf,
        /// Its major version (15 when unknown).
        major: u32,
    },
    /// No sysbench on PATH.
    #[error("no sysbench binary; apt-get install sysbench")]
    Sysbench,
}

/// A measured run's output that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunParseError {
    /// pgbench's.
    #[error(transparent)]
    Pgbench(#[from] crate::pgbench::ParseError),
    /// sysbench's.
    #[error(transparent)]
    Sysbench(#[from] crate::sysbench::ParseError),
}

/// Why a driver's run failed.
#[derive(Debug, thiserror::Error)]
pub enum DriveError {
    /// Its output file could not be created.
    #[error("creating {}: {err}", .path.display())]
    Output {
        /// The file.
        path: PathBuf,
        /// What the create said.
        err: std::io::Error,
    },
    /// It could not be started, waited for, or ran over its time.
    #[error(transparent)]
    Child(#[from] ChildError),
    /// It exited with an error.
    #[error("{program} exited with {status}: {tail}")]
    Exited {
        /// The program.
        program: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// Its last lines of output.
        tail: String,
    },
}

/// Where the driver connects.
pub struct Target<'a> {
    /// The directory of the Unix socket.
    pub sock: &'a Path,
    /// The port the socket is named after.
    pub port: u16,
    /// The cluster (its user, its bin directory).
    pub cluster: &'a Cluster,
}

/// What `bench pg` does with a load driver: its built-in scripts, its binary, its command lines, and
/// reading its output.
pub trait Drive {
    /// Its built-in scripts (pgbench `-b`) or tests (sysbench's first argument).
    fn builtins(self) -> &'static [&'static str];

    /// Its binary: pgbench beside the server's binaries, sysbench on PATH. The error names the package.
    fn find(self, bin: &BinDir) -> Result<PathBuf, MissingDriver>;

    /// The command that loads the data set at `spec.scale`.
    fn load_command(self, exe: &Path, t: &Target<'_>, spec: &Spec) -> Command;

    /// The command that runs one transaction of a custom script (pgbench parses it before connecting; one
    /// transaction also proves it runs here). None for drivers without custom scripts.
    fn script_check_command(self, t: &Target<'_>, spec: &Spec) -> Option<Command>;

    /// The command of one run of `seconds` at `clients`; a measured run (with `lat_prefix`, where pgbench
    /// writes its sampled transaction log) also prints progress every second.
    fn run_command(
        self,
        exe: &Path,
        t: &Target<'_>,
        spec: &Spec,
        clients: u32,
        seconds: u64,
        lat_prefix: Option<&Path>,
    ) -> Command;

    /// Parses a measured run's output (and pgbench's sampled transaction log under `lat_prefix`, which it
    /// removes) into a repetition; the matrix fills in the rest.
    fn parse_run(self, text: &str, lat_prefix: &Path) -> Result<Rep, RunParseError>;
}

impl Drive for Driver {
    fn builtins(self) -> &'static [&'static str] {
        match self {
            Self::Pgbench => &PGBENCH_BUILTINS,
            Self::Sysbench => &SYSBENCH_TESTS,
        }
    }

    fn find(self, bin: &BinDir) -> Result<PathBuf, MissingDriver> {
        match self {
            Self::Pgbench => {
                let p = bin.dir.join("pgbench");
                if p.is_file() {
                    Ok(p)
                } else {
                    Err(MissingDriver::Pgbench {
                        dir: bin.dir.clone(),
                        major: bin.major.unwrap_or(15),
                    })
                }
            }
            Self::Sysbench => osutil::which("sysbench", &[]).ok_or(MissingDriver::Sysbench),
        }
    }

    fn load_command(self, exe: &Path, t: &Target<'_>, spec: &Spec) -> Command {
        match self {
            Self::Pgbench => {
                let mut cmd = t.cluster.command("pgbench");
                cmd.args(["-i", "-q", "-s", &spec.scale.to_string()]);
                pgbench_conn(&mut cmd, t);
                cmd.arg(DB);
                cmd
            }
            Self::Sysbench => {
                let mut cmd = sysbench_command(exe, t, spec);
                cmd.args(["--threads=2", "prepare"]);
                cmd
            }
        }
    }

    fn script_check_command(self, t: &Target<'_>, spec: &Spec) -> Option<Command> {
        match self {
            Self::Pgbench if spec.script_text.is_some() => {
                let mut cmd = t.cluster.command("pgbench");
                cmd.args(["-n", "-t", "1", "-c", "1", "-f", &spec.script]);
                pgbench_conn(&mut cmd, t);
                cmd.arg(DB);
                Some(cmd)
            }
            _ => None,
        }
    }

    fn run_command(
        self,
        exe: &Path,
        t: &Target<'_>,
        spec: &Spec,
        clients: u32,
        seconds: u64,
        lat_prefix: Option<&Path>,
    ) -> Command {
        match self {
            Self::Pgbench => {
                let mut cmd = Command::new(exe);
                pgbench_conn(&mut cmd, t);
                cmd.arg("-n")
                    .arg("-c")
                    .arg(clients.to_string())
                    .arg("-j")
                    .arg(spec.threads.min(clients).max(1).to_string())
                    .arg("-T")
                    .arg(seconds.to_string())
                    .arg("-M")
                    .arg(spec.protocol.name());
                if spec.script_text.is_some() {
                    cmd.arg("-f").arg(&spec.script);
                } else {
                    cmd.arg("-b").arg(&spec.script);
                }
                if spec.reconnect {
                    cmd.arg("-C");
                }
                if let Some(p) = lat_prefix {
                    cmd.arg("-P").arg("1");
                    if spec.latency_sample > 0.0 {
                        cmd.arg("-l").arg(format!("--log-prefix={}", p.display()));
                        if spec.latency_sample < 1.0 {
                            cmd.arg(format!("--sampling-rate={}", spec.latency_sample));
                        }
                    }
                }
                cmd.arg(DB);
                cmd
            }
            Self::Sysbench => {
                let mut cmd = sysbench_command(exe, t, spec);
                cmd.arg(format!("--threads={clients}"))
                    .arg(format!("--time={seconds}"))
                    .arg("--report-interval=1")
                    .arg("--percentile=99");
                if spec.protocol == Protocol::Simple {
                    cmd.arg("--db-ps-mode=disable");
                }
                cmd.arg("run");
                cmd
            }
        }
    }

    fn parse_run(self, text: &str, lat_prefix: &Path) -> Result<Rep, RunParseError> {
        let mut rep = Rep {
            round: 0,
            tps: 0.0,
            transactions: 0,
            failed: 0,
            latency_ms: Latency::default(),
            connection_ms: None,
            series: Vec::new(),
            page_tables_kib: 0,
            pss_kib: 0,
            host_page_tables_kib: 0,
            minflt_per_tx: 0.0,
            nivcsw_per_tx: 0.0,
            nvcsw_per_tx: 0.0,
            sampled: Sampled::default(),
            segment: SegmentCheck::default(),
            steal_pct: None,
            resched_ipis_per_tx: None,
            call_ipis_per_tx: None,
            command: Vec::new(),
            diagnosis: None,
            diagnosis_unmeasured: Vec::new(),
            rseq_slice: None,
        };
        match self {
            Self::Sysbench => {
                let r = crate::sysbench::parse(text)?;
                rep.tps = r.tps;
                rep.transactions = r.transactions;
                rep.failed = r.ignored_errors.unwrap_or(0);
                rep.latency_ms = Latency {
                    mean: r.latency_avg_ms,
                    stddev: None,
                    p50: None,
                    p90: None,
                    p99: r.latency_pct_ms.filter(|_| r.percentile == Some(99.0)),
                    max: r.latency_max_ms,
                    sampled: r.transactions,
                };
                rep.series = r
                    .intervals
                    .iter()
                    .map(|i| Point {
                        t_s: i.t_s,
                        tps: i.tps,
                        latency_ms: i.latency_pct_ms,
                    })
                    .collect();
            }
            Self::Pgbench => {
                let s = crate::pgbench::parse(text)?;
                rep.tps = s.tps;
                rep.transactions = s.transactions;
                rep.failed = s.failed.unwrap_or(0);
                rep.connection_ms = s.initial_connection_ms.or(s.average_connection_ms);
                rep.series = s
                    .progress
                    .iter()
                    .map(|p| Point {
                        t_s: p.t_s,
                        tps: p.tps,
                        latency_ms: p.latency_ms,
                    })
                    .collect();
                let mut lat = read_latency_log(lat_prefix);
                lat.mean = s.latency_avg_ms;
                lat.stddev = s.latency_stddev_ms;
                rep.latency_ms = lat;
            }
        }
        Ok(rep)
    }
}

/// The TPS of a progress line of either driver (the matrix reads whichever file has them).
pub fn progress_tps(line: &str) -> Option<f64> {
    crate::pgbench::parse_progress(line.trim())
        .map(|p| p.tps)
        .or_else(|| crate::sysbench::parse_interval(line.trim()).map(|i| i.tps))
}

fn pgbench_conn(cmd: &mut Command, t: &Target<'_>) {
    cmd.arg("-h")
        .arg(t.sock)
        .arg("-p")
        .arg(t.port.to_string())
        .arg("-U")
        .arg(&t.cluster.run_as().user);
}

/// sysbench with the script and its connection to the cluster, the part every sysbench step shares.
fn sysbench_command(exe: &Path, t: &Target<'_>, spec: &Spec) -> Command {
    let mut cmd = Command::new(exe);
    cmd.arg(&spec.script);
    sysbench_conn(&mut cmd, t, spec);
    cmd
}

fn sysbench_conn(cmd: &mut Command, t: &Target<'_>, spec: &Spec) {
    cmd.arg("--db-driver=pgsql")
        .arg(format!("--pgsql-host={}", t.sock.display()))
        .arg(format!("--pgsql-port={}", t.port))
        .arg(format!("--pgsql-user={}", t.cluster.run_as().user))
        .arg(format!("--pgsql-db={DB}"))
        .arg("--tables=1")
        .arg(format!("--table-size={}", spec.scale as u64 * 100_000));
}

/// Reads pgbench's per-transaction logs `<prefix>.<pid>[.<thread>]` (column 3 is the latency in us;
/// failed or skipped transactions carry a word there and are left out) and removes them.
pub fn read_latency_log(prefix: &Path) -> Latency {
    let mut us: Vec<f64> = Vec::new();
    let (Some(dir), Some(stem)) = (prefix.parent(), prefix.file_name().and_then(|s| s.to_str()))
    else {
        return Latency::default();
    };
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Latency::default();
    };
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(&format!("{stem}.")) {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(e.path()) {
            us.extend(parse_latency_log(&text));
        }
        let _ = std::fs::remove_file(e.path());
    }
    latency_of(&mut us)
}

/// The latencies (us) of one pgbench transaction log.
pub fn parse_latency_log(text: &str) -> Vec<f64> {
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(2)?.parse::<f64>().ok())
        .collect()
}

fn latency_of(us: &mut [f64]) -> Latency {
    if us.is_empty() {
        return Latency::default();
    }
    us.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| {
        let i = ((p * us.len() as f64).ceil() as usize).clamp(1, us.len()) - 1;
        us[i] / 1000.0
    };
    Latency {
        mean: None,
        stddev: None,
        p50: Some(q(0.50)),
        p90: Some(q(0.90)),
        p99: Some(q(0.99)),
        max: Some(us[us.len() - 1] / 1000.0),
        sampled: us.len() as u64,
    }
}

/// The command line as the result records it.
pub fn argv(cmd: &Command) -> Vec<String> {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// How a driver's run ended.
pub enum Driven {
    /// It ran to the end and printed this.
    Done(String),
    /// The stop flag was raised and it was stopped.
    Interrupted,
}

/// Runs a driver to completion (output to files under `stem`), polling for SIGINT, calling `live` with
/// the latest per-second TPS it printed. A run exceeding its time by a minute is killed.
pub fn drive(
    mut cmd: Command,
    stem: &Path,
    seconds: u64,
    live: &mut dyn FnMut(f64, f64),
) -> Result<Driven, DriveError> {
    let out_path = stem.with_extension("out");
    let err_path = stem.with_extension("err");
    let create = |path: &PathBuf| {
        File::create(path).map_err(|err| DriveError::Output {
            path: path.clone(),
            err,
        })
    };
    let (out, err) = (create(&out_path)?, create(&err_path)?);
    let mut child = Child::spawn(
        &mut cmd,
        Stdio::from(out),
        Stdio::from(err),
        Duration::from_secs(5),
    )?;
    let t = Instant::now();
    let ended = child.wait(
        Duration::from_secs(seconds + 60),
        Duration::from_millis(500),
        || {
            // The fraction of the run's time gone, and the driver's last progress line's TPS (0 before
            // it).
            let frac = (t.elapsed().as_secs_f64() / seconds.max(1) as f64).min(1.0);
            let tps = latest_tps(&err_path).or_else(|| latest_tps(&out_path));
            live(frac, tps.unwrap_or(0.0));
        },
    )?;
    let status = match ended {
        Ended::Interrupted => return Ok(Driven::Interrupted),
        Ended::Exited(st) => st,
    };
    let text = format!(
        "{}\n{}",
        std::fs::read_to_string(&err_path).unwrap_or_default(),
        std::fs::read_to_string(&out_path).unwrap_or_default()
    );
    if !status.success() {
        return Err(DriveError::Exited {
            program: child.program().to_string(),
            status,
            tail: osutil::tail(&text, 3, " | "),
        });
    }
    Ok(Driven::Done(text))
}

fn latest_tps(path: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().rev().find_map(progress_tps)
}

#[cfg(test)]
mod tests {
    use super::{latency_of, parse_latency_log};
    use results::pg::Latency;

    #[test]
    fn latency_log_lines_of_pg13_to_17() {
        // client tx latency_us script epoch us [lag] [retries]; failed/skipped transactions carry a word.
        let text = "0 51 197 0 1795326076 72631\n1 52 181 0 1795326076 72890 12\n3 7 failed 0 1795326076 1 0\n2 9 skipped 0 1795326076 5 100\n";
        assert_eq!(parse_latency_log(text), vec![197.0, 181.0]);
        let mut us: Vec<f64> = (1..=1000).map(|i| i as f64).collect();
        let l = latency_of(&mut us);
        assert_eq!(
            (l.p50, l.p90, l.p99, l.max),
            (Some(0.5), Some(0.9), Some(0.99), Some(1.0))
        );
        assert_eq!(l.sampled, 1000);
        assert_eq!(latency_of(&mut []), Latency::default());
    }
}
