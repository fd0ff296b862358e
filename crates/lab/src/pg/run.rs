//! The `bench pg` matrix: a throwaway cluster, loaded once, restarted for each shared_buffers x huge_pages
//! configuration, driven by pgbench (or sysbench, optionally through pgbouncer) at each client count, for
//! `repeat` rounds (each round runs every configuration once, so slow drift of the machine spreads over all
//! of them instead of biasing one). Every measured run is sampled once a second from /proc; after each run
//! the segment's backing is read from the postmaster's smaps, and a configuration that asked for
//! `huge_pages=on` but ran on 4 KB pages fails instead of yielding a data point. Hugetlb pools grown for a
//! configuration are restored after its server stops; the cluster goes on every exit path.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hostfacts::pgbin::PgBinError;

use crate::matrix::{self, At, Bench, Matrix, Order, Step, Unopened};
use crate::pg::huge::{backing_error, hugepages_needed, reserve, segment_check, Reserved};
use axes::{HugePages, PssWhen};
use hostguard::hugetlb_pool::{self, PoolGuard};
use osutil::output::OutputError;
use osutil::stop::SignalError;
use pgharness::pgbouncer::{self, PgBouncer, PgBouncerError};
use pgharness::pgcluster::{Cluster, ClusterError};
use pgharness::pgdriver::{argv, drive, Drive, Driven, MissingDriver, Target};
use pgharness::procsample::{Pss, Sampler};

use results::pg::{Cell, CellSummary, PgResult, Rep, Setup, Spec};
use results::Status;

use axes::Driver;
use pgharness::pgdriver::DB;

/// Live progress: (runs done, runs in all, cell label, phase, fraction of the current run done, live TPS).
pub type ProgressFn = Box<dyn FnMut(usize, usize, &str, &str, f64, f64)>;

/// Called after each measured run with its cell and the run.
pub type RepFn = Box<dyn FnMut(&Cell, &Rep)>;

/// Why the matrix could not run (a configuration that fails is recorded in the result instead). Errors
/// about an option's value (`Prewarm`, `ScriptRejected`, a pooler not installed) say what failed; a
/// command line adds its option's name.
#[derive(Debug, thiserror::Error)]
pub enum PgRunError {
    /// The stop signals' handlers could not be installed.
    #[error(transparent)]
    Signal(#[from] SignalError),
    /// PostgreSQL's binaries could not be found.
    #[error(transparent)]
    PgBin(#[from] PgBinError),
    /// The driver is not installed.
    #[error(transparent)]
    MissingDriver(#[from] MissingDriver),
    /// The pooler is not installed or did not start.
    #[error(transparent)]
    Pooler(#[from] PgBouncerError),
    /// The throwaway cluster could not be made, started, stopped or removed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The data load could not be started.
    #[error("running the data load: {err}")]
    LoadSpawn {
        /// What starting it said.
        err: std::io::Error,
    },
    /// The data load failed.
    #[error("loading the data failed: {output}")]
    Load {
        /// Its stderr and stdout.
        output: String,
    },
    /// The pg_prewarm extension could not be created.
    #[error("{err} (pg_prewarm ships with Debian's postgresql-NN server package)")]
    PrewarmExtension {
        /// What psql said.
        err: ClusterError,
    },
    /// Prewarming the tables failed.
    #[error("pg_prewarm: {err}")]
    Prewarm {
        /// What psql said.
        err: ClusterError,
    },
    /// pgbench could not be asked to check the custom script.
    #[error("{script}: checking it with pgbench: {err}")]
    ScriptCheck {
        /// The script.
        script: String,
        /// What starting pgbench said.
        err: std::io::Error,
    },
    /// pgbench refuses the custom script.
    #[error("{script}: pgbench rejected it: {why}")]
    ScriptRejected {
        /// The script.
        script: String,
        /// pgbench's error line.
        why: String,
    },
    /// The server started but wrote no postmaster.pid.
    #[error("the server started but wrote no postmaster.pid")]
    NoPostmasterPid,
    /// The result file could not be written.
    #[error(transparent)]
    Write(#[from] OutputError),
}

/// How to run.
pub struct RunOptions {
    /// Grow the hugetlb pool for configurations with huge pages (restored after each).
    pub reserve_hugepages: bool,
    /// The result file.
    pub out: PathBuf,
    /// Where the cluster's private directory goes (default: the temp dir).
    pub parent_dir: Option<PathBuf>,
    /// Live progress.
    pub progress: ProgressFn,
    /// Called after each measured run with the cell and its run.
    pub on_rep: RepFn,
    /// How the caller's user grows the hugetlb pool (a command line names its option), for the reason of a
    /// `huge_pages=on` configuration skipped for want of free pages: "... and the pool has F: <grow_hint>".
    pub grow_hint: String,
    /// The preemption model as an axis (`--switch-preempt` with two or more models).
    pub models: Option<matrix::ModelAxis>,
}

/// Runs the matrix. Errors are one line naming the fix; everything the run created is gone when it
/// returns, also after SIGINT (then `envelope.interrupted` is set and the cells not reached say so).
pub fn run(mut spec: Spec, mut opts: RunOptions) -> Result<PgResult, PgRunError> {
    osutil::stop::install_signal_flag()?;
    for line in hugetlb_pool::recover_stale_pools() {
        osutil::msg!("preemptlab: {line}");
    }
    spec.builds = crate::pg::builds::builds_of(&spec);
    let bins = spec
        .builds
        .iter()
        .map(|b| hostfacts::pgbin::find(Some(Path::new(&b.bin_dir)), None))
        .collect::<Result<Vec<_>, _>>()?;
    let driver = spec.driver;
    // One driver for every build (the first build's, else the one on PATH), so that the client is not a
    // second variable of the builds axis.
    let exe = driver.find(&bins[0])?;
    let bouncer_bin = match &spec.pooler {
        Some(_) => Some(pgbouncer::find()?),
        None => None,
    };
    // A cluster per build (data directories differ between major versions), each loaded once.
    let mut clusters = Vec::new();
    for (b, bin) in spec.builds.iter_mut().zip(bins) {
        let cluster = Cluster::create(bin, opts.parent_dir.as_deref())?;
        if b.version.is_none() {
            b.version = pg_version(&cluster);
        }
        clusters.push(cluster);
    }
    spec.pg_version = Some(crate::pg::builds::versions(&spec.builds));
    let mut res = PgResult {
        envelope: matrix::unfinished(results::Kind::BenchPg),
        spec: spec.clone(),
        setup: Setup::default(),
        setups: Vec::new(),
        cells: Vec::new(),
    };
    let max_clients = *spec.clients.iter().max().expect("validated non-empty");
    for build in &spec.builds {
        for sb in &spec.shared_buffers {
            for &hp in &spec.huge_pages {
                for &c in &spec.clients {
                    res.cells.push(Cell {
                        build: Some(build.clone()),
                        shared_buffers: sb.clone(),
                        huge_pages: hp,
                        clients: c,
                        preempt: None,
                        status: Status::Ok,
                        reason: None,
                        server_settings: server_settings(&spec, sb, hp, max_clients),
                        hugepages_needed: None,
                        hugepages_free_seen: None,
                        reps: Vec::new(),
                        summary: None,
                    });
                }
            }
        }
    }
    // A group is a configuration (build x shared_buffers x huge_pages): its client counts share a server.
    // With the preemption model as an axis, the models are outermost.
    let (groups, switching) = matrix::plan(
        &mut res.cells,
        spec.clients.len(),
        opts.models.take(),
        |c, m| c.preempt = Some(m),
    );
    for (cluster, build) in clusters.iter_mut().zip(&spec.builds) {
        (opts.progress)(0, 1, &format!("loading {}", build.name), "init", 0.0, 0.0);
        let setup = load(cluster, &spec, driver, &exe)?;
        res.setups.push(setup);
        res.setup = res.setups[0].clone();
        osutil::output::write_json(&opts.out, &res)?;
    }

    let out = opts.out.clone();
    let matrix = Matrix {
        groups,
        repeat: spec.repeat,
        order: Order::Rounds,
        noun: "runs",
        out: &out,
        written: true,
        switching,
    };
    let mut bench = PgBench {
        spec: &spec,
        opts: &mut opts,
        clusters,
        bouncer_bin,
        driver,
        exe,
    };
    let res = matrix.run(&mut bench, res)?;
    for cluster in bench.clusters {
        cluster.remove()?;
    }
    Ok(res)
}

/// `bench pg` on the matrix driver: a group is a configuration, its server started (and the hugetlb pool
/// grown for it) when the group opens and stopped (the pool restored) when it closes.
struct PgBench<'a> {
    spec: &'a Spec,
    opts: &'a mut RunOptions,
    /// A cluster per build, loaded.
    clusters: Vec<Cluster>,
    bouncer_bin: Option<PathBuf>,
    driver: Driver,
    exe: PathBuf,
}

/// A configuration's running server.
struct Server {
    cluster: usize,
    pm: u32,
    huge_pages: HugePages,
    bouncer: Option<PgBouncer>,
    pool: Option<PoolGuard>,
}

impl Bench for PgBench<'_> {
    type Doc = PgResult;
    type Shared = Server;
    type Error = PgRunError;

    fn open(
        &mut self,
        res: &mut PgResult,
        cells: Range<usize>,
        _round: u32,
    ) -> Result<Server, Unopened<PgRunError>> {
        let (first, spec) = (cells.start, self.spec);
        // The cluster of the group's build (build names are unique, and every cell has its build).
        let ci = (spec.builds.iter())
            .position(|b| Some(&b.name) == res.cells[first].build.as_ref().map(|c| &c.name))
            .expect("a cell's build is one of the spec's");
        let settings = res.cells[first].server_settings.clone();
        let hp = res.cells[first].huge_pages;
        // Size and, if allowed, grow the pool before the server starts; restore it after it stops.
        let needed = hugepages_needed(&self.clusters[ci], &settings, spec);
        for c in cells.clone() {
            res.cells[c].hugepages_needed = needed;
        }
        let reserved = reserve(
            hp,
            needed,
            spec,
            self.opts.reserve_hugepages,
            &self.opts.grow_hint,
        );
        let pool = match reserved {
            Ok(Reserved::Grown(g)) => Some(g),
            Ok(Reserved::CountedOn(free)) => {
                for c in cells.clone() {
                    res.cells[c].hugepages_free_seen = Some(free);
                }
                None
            }
            Ok(Reserved::Nothing) => None,
            Err(Skip(status, why)) => return Err(Unopened::Cells(status, why)),
        };
        let max_clients = cells.map(|c| res.cells[c].clients).max().unwrap_or(1);
        let cluster = &mut self.clusters[ci];
        match start_config(
            cluster,
            spec,
            &settings,
            hp,
            res,
            max_clients,
            self.bouncer_bin.as_deref(),
        ) {
            Ok((pm, bouncer)) => Ok(Server {
                cluster: ci,
                pm,
                huge_pages: hp,
                bouncer,
                pool,
            }),
            Err(fail) => {
                let stopped = cluster.stop();
                drop(pool);
                match fail {
                    Fail::Cell(why) => match stopped {
                        Ok(()) => Err(Unopened::Cells(Status::Failed, why)),
                        Err(e) => Err(Unopened::Abort(e.into())),
                    },
                    Fail::Run(e) => Err(Unopened::Abort(e)),
                }
            }
        }
    }

    fn rep(&mut self, server: &mut Server, cell: &Cell, at: At) -> Step<Rep, PgRunError> {
        match measure(self, server, cell, at) {
            Ok(Some(rep)) => Step::Rep(rep),
            Ok(None) => Step::Interrupted,
            Err(why) => Step::Group(why),
        }
    }

    fn close(&mut self, server: Server) -> Result<(), PgRunError> {
        drop(server.bouncer);
        let stopped = self.clusters[server.cluster].stop();
        drop(server.pool);
        Ok(stopped?)
    }

    fn summarize(&self, cell: &mut Cell) {
        cell.summary = summarize(&cell.reps);
    }

    fn on_rep(&mut self, cell: &Cell) {
        (self.opts.on_rep)(cell, cell.reps.last().expect("just pushed"));
    }
}

/// A configuration not run: its cells' status and reason, as the result records them.
pub(crate) struct Skip(pub(crate) Status, pub(crate) String);

enum Fail {
    /// This configuration failed; the matrix goes on. The cells' reason, as the result records it.
    Cell(String),
    /// The run cannot go on.
    Run(PgRunError),
}

fn pg_version(cluster: &Cluster) -> Option<String> {
    let out = cluster.command("postgres").arg("--version").output().ok()?;
    let t = String::from_utf8_lossy(&out.stdout);
    t.split_whitespace().nth(2).map(str::to_string)
}

/// The throwaway cluster's name: the audit reads it from the postmaster's command line and knows the
/// server for this bench's (its huge pages are temporary, not an instance's need).
fn throwaway_name() -> (String, String) {
    (
        "cluster_name".to_string(),
        results::host::postgres::THROWAWAY_CLUSTER_NAME.to_string(),
    )
}

/// The settings a configuration's server starts with.
pub fn server_settings(
    spec: &Spec,
    sb: &str,
    hp: HugePages,
    max_clients: u32,
) -> Vec<(String, String)> {
    let mut s = vec![
        throwaway_name(),
        ("shared_buffers".to_string(), sb.to_string()),
        ("huge_pages".to_string(), hp.to_string()),
        (
            "max_connections".to_string(),
            (max_clients + 10).to_string(),
        ),
    ];
    for (k, v) in &spec.settings {
        if let Some(x) = s.iter_mut().find(|(n, _)| n == k) {
            x.1 = v.clone();
        } else {
            s.push((k.clone(), v.clone()));
        }
    }
    s
}

fn load(
    cluster: &mut Cluster,
    spec: &Spec,
    driver: Driver,
    exe: &Path,
) -> Result<Setup, PgRunError> {
    let mut settings = vec![
        throwaway_name(),
        ("fsync".to_string(), "off".to_string()),
        ("max_wal_size".to_string(), "8GB".to_string()),
        ("maintenance_work_mem".to_string(), "256MB".to_string()),
    ];
    settings.push(("max_connections".into(), "20".into()));
    cluster.start(&settings)?;
    let loaded = (|| -> Result<Setup, PgRunError> {
        cluster.psql("postgres", &format!("CREATE DATABASE {DB}"))?;
        if spec.prewarm {
            cluster
                .psql(DB, "CREATE EXTENSION pg_prewarm")
                .map_err(|err| PgRunError::PrewarmExtension { err })?;
        }
        let t = Instant::now();
        let sock = cluster.socket_dir();
        let target = Target {
            sock: &sock,
            port: cluster.port(),
            cluster,
        };
        let out = driver
            .load_command(exe, &target, spec)
            .output()
            .map_err(|err| PgRunError::LoadSpawn { err })?;
        if !out.status.success() {
            return Err(PgRunError::Load {
                output: format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stderr).trim(),
                    String::from_utf8_lossy(&out.stdout).trim()
                ),
            });
        }
        let load_s = t.elapsed().as_secs_f64();
        cluster.psql(DB, "VACUUM ANALYZE")?;
        if let Some(mut cmd) = driver.script_check_command(&target, spec) {
            let out = cmd.output().map_err(|err| PgRunError::ScriptCheck {
                script: spec.script.clone(),
                err,
            })?;
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                let why = err.lines().find(|l| l.contains("error"));
                return Err(PgRunError::ScriptRejected {
                    script: spec.script.clone(),
                    why: why.unwrap_or(err.trim()).to_string(),
                });
            }
        }
        let db_bytes = cluster
            .psql(DB, &format!("SELECT pg_database_size('{DB}')"))
            .ok()
            .and_then(|v| v.parse().ok());
        Ok(Setup {
            load_s,
            sync_s: 0.0,
            db_bytes,
            prewarmed_blocks: None,
        })
    })();
    let stopped = cluster.stop();
    let mut setup = loaded?;
    stopped?;
    // The load ran with fsync=off: write its dirty pages back now, or the kernel's flusher does it
    // during the first measured runs and takes CPU from them.
    let t = Instant::now();
    nix::unistd::sync();
    setup.sync_s = t.elapsed().as_secs_f64();
    Ok(setup)
}

/// Starts a configuration's server (and the pooler in front of it): the postmaster's PID and the pooler.
/// The segment's backing is checked before anything is measured; `--prewarm` loads the tables.
fn start_config(
    cluster: &mut Cluster,
    spec: &Spec,
    settings: &[(String, String)],
    hp: HugePages,
    res: &mut PgResult,
    max_clients: u32,
    bouncer_bin: Option<&Path>,
) -> Result<(u32, Option<PgBouncer>), Fail> {
    cluster
        .start(settings)
        .map_err(|e| Fail::Cell(format!("the server did not start: {e}")))?;
    let pm = cluster
        .postmaster_pid()
        .ok_or(Fail::Run(PgRunError::NoPostmasterPid))?;
    let seg = segment_check(cluster, pm, spec);
    if let Some(why) = backing_error(hp, &seg) {
        return Err(Fail::Cell(why));
    }
    if spec.prewarm {
        let sql = "SELECT sum(pg_prewarm(c.oid::regclass)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i')";
        let blocks = cluster
            .psql(DB, sql)
            .map_err(|err| Fail::Run(PgRunError::Prewarm { err }))?;
        res.setup.prewarmed_blocks = blocks.parse().ok();
    }
    let bouncer = match bouncer_bin {
        Some(b) => {
            let started = PgBouncer::start(b, cluster, cluster.port() + 1, max_clients);
            Some(started.map_err(|e| Fail::Run(e.into()))?)
        }
        None => None,
    };
    Ok((pm, bouncer))
}

/// One measured run of `cell` on the configuration's server (after its warm-up run): None when a stop
/// signal cut it short; the error fails the configuration.
fn measure(b: &mut PgBench, server: &Server, cell: &Cell, at: At) -> Result<Option<Rep>, String> {
    let (spec, driver, exe) = (b.spec, b.driver, b.exe.as_path());
    let (pm, hp) = (server.pm, server.huge_pages);
    let cluster = &b.clusters[server.cluster];
    let (sock, port) = match &server.bouncer {
        Some(b) => (b.socket_dir().to_path_buf(), b.port()),
        None => (cluster.socket_dir(), cluster.port()),
    };
    let (round, c) = (at.round, at.cell);
    let clients = cell.clients;
    let build = match (&cell.build, spec.builds.len() > 1) {
        (Some(b), true) => format!("{} ", b.name),
        _ => String::new(),
    };
    let model = cell.preempt.map(|m| format!("{m} ")).unwrap_or_default();
    let label = format!(
        "{build}{model}sb {} hp {} c {} r{}",
        cell.shared_buffers,
        hp,
        clients,
        round + 1
    );
    let target = Target {
        sock: &sock,
        port,
        cluster,
    };
    let (d, t) = (at.step, at.steps);
    let progress = &mut b.opts.progress;
    if spec.warmup_s > 0 {
        progress(d, t, &label, "warm-up", 0.0, 0.0);
        let cmd = driver.run_command(exe, &target, spec, clients, spec.warmup_s, None);
        let ran = drive(
            cmd,
            &cluster.root().join("warmup"),
            spec.warmup_s,
            &mut |_, tps| progress(d, t, &label, "warm-up", 0.0, tps),
        );
        match ran {
            Ok(Driven::Interrupted) => return Ok(None),
            Ok(Driven::Done(_)) => {}
            Err(e) => return Err(format!("the warm-up run failed: {e}")),
        }
    }
    let lat_prefix = cluster.root().join(format!("lat-{round}-{c}"));
    let cmd = driver.run_command(
        exe,
        &target,
        spec,
        clients,
        spec.duration_s,
        Some(&lat_prefix),
    );
    let argv = argv(&cmd);
    let rseq0 = crate::pg::builds::read_counters(cluster);
    let stat0 = osutil::procstat::now();
    let ipis0 = osutil::procinterrupts::now();
    let pss = match spec.pss {
        PssWhen::Every => Pss::Every,
        PssWhen::Never => Pss::Never,
        PssWhen::End => Pss::At((spec.duration_s as f64 - 1.0).max(spec.duration_s as f64 / 2.0)),
    };
    let sampler = Sampler::start(pm, Duration::from_secs_f64(spec.sample_interval_s), pss);
    let ran_done = AtomicBool::new(false);
    // Prepared before the run (the audit and the symbol tables take a while), observing during it.
    let prepared = spec.diagnose.then(|| diagnose_prepare(pm, spec.duration_s));
    let window_open = AtomicBool::new(false);
    let (ran, diagnosis) = std::thread::scope(|s| {
        let diagnosis = prepared.map(|p| {
            s.spawn(|| {
                let stop = || ran_done.load(Ordering::Relaxed) || osutil::stop::interrupted();
                let mut opened = |_| window_open.store(true, Ordering::Relaxed);
                p.map(|p| p.observe(&stop, &mut opened))
            })
        });
        // The run starts once the diagnosis's window is open: before it, the diagnosis reads the
        // kernel's symbols and the postmaster's mappings, seconds under an emulated CPU (an arm64 guest
        // under TCG read for 8 s and then observed 0.45 s of an 8 s run).
        if let Some(h) = &diagnosis {
            while !window_open.load(Ordering::Relaxed)
                && !h.is_finished()
                && !osutil::stop::interrupted()
            {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let ran = drive(
            cmd,
            &cluster.root().join("run"),
            spec.duration_s,
            &mut |frac, tps| progress(d, t, &label, "measure", frac, tps),
        );
        ran_done.store(true, Ordering::Relaxed);
        (ran, diagnosis.map(|h| h.join()))
    });
    let sampled = sampler.stop();
    let steal_pct = osutil::procstat::steal_pct_since(stat0);
    let ipis = ipis0
        .zip(osutil::procinterrupts::now())
        .map(|(a, b)| a.since(b));
    let text = match ran {
        Ok(Driven::Interrupted) => return Ok(None),
        Ok(Driven::Done(text)) => text,
        Err(e) => return Err(format!("the measured run failed: {e}")),
    };
    let seg = segment_check(cluster, pm, spec);
    if let Some(why) = backing_error(hp, &seg) {
        return Err(why);
    }
    let mut rep = driver
        .parse_run(&text, &lat_prefix)
        .map_err(|e| e.to_string())?;
    rep.round = round;
    rep.command = argv;
    rep.steal_pct = steal_pct;
    rep.segment = seg;
    let tx = rep.transactions.max(1) as f64;
    rep.page_tables_kib = sampled.peak_vm_pte_kib();
    rep.pss_kib = sampled.peak_pss_kib();
    rep.host_page_tables_kib = sampled.peak_host_page_tables_kib();
    rep.minflt_per_tx = sampled.minflt as f64 / tx;
    rep.nvcsw_per_tx = sampled.nvcsw as f64 / tx;
    rep.nivcsw_per_tx = sampled.nivcsw as f64 / tx;
    let per_tx = |n: Option<u64>| n.filter(|_| rep.transactions > 0).map(|n| n as f64 / tx);
    rep.resched_ipis_per_tx = per_tx(ipis.and_then(|d| d.resched));
    rep.call_ipis_per_tx = per_tx(ipis.and_then(|d| d.call));
    rep.sampled = sampled;
    rep.rseq_slice = rseq0.and_then(|before| {
        let left = crate::pg::builds::wait_for_client_backends(cluster, server.bouncer.is_some());
        let after = crate::pg::builds::read_counters(cluster)?;
        Some(crate::pg::builds::counters_since(&after, &before, left))
    });
    match diagnosis {
        Some(Ok(Ok(mut r))) => {
            rep.diagnosis = r.instances.pop().map(Box::new);
            rep.diagnosis_unmeasured = r.unmeasured;
        }
        Some(Ok(Err(e))) => rep.diagnosis_unmeasured = vec![diagnosis_failed(e.to_string())],
        Some(Err(_)) => rep.diagnosis_unmeasured = vec![diagnosis_failed("it panicked".into())],
        None => {}
    }
    Ok(Some(rep))
}

/// `--diagnose`: prepares a diagnosis of the cluster of postmaster `pm` for the measured run (its window
/// ends with the run, or on a stop signal; the duration is only a bound).
fn diagnose_prepare(
    pm: u32,
    duration_s: u64,
) -> Result<diagnose::Prepared, diagnose::DiagnoseError> {
    let mut opts = diagnose::Options::new(Duration::from_secs(duration_s + 60));
    opts.pids = vec![pm];
    // Every switch counted: a bench compares cells that all carry the same diagnosis, and its in-fault
    // preemption counts are evidence the bench reports.
    opts.switch_duty_pct = 100;
    opts.cpu_duty_pct = 100;
    diagnose::prepare(
        &opts,
        hostfacts::envelope::envelope(results::Kind::Diagnose),
    )
}

fn diagnosis_failed(why: String) -> results::diagnose::Unmeasured {
    results::diagnose::Unmeasured {
        what: "diagnosis".into(),
        why,
    }
}

/// Centres and spreads over the runs; None without runs.
pub fn summarize(reps: &[Rep]) -> Option<CellSummary> {
    if reps.is_empty() {
        return None;
    }
    let f = |g: &dyn Fn(&Rep) -> f64| stats::summarize(&reps.iter().map(g).collect::<Vec<_>>());
    let p99: Vec<f64> = reps.iter().filter_map(|r| r.latency_ms.p99).collect();
    Some(CellSummary {
        tps: f(&|r| r.tps),
        latency_p99_ms: (!p99.is_empty()).then(|| stats::summarize(&p99)),
        page_tables_kib: f(&|r| r.page_tables_kib as f64),
        pss_kib: f(&|r| r.pss_kib as f64),
        minflt_per_tx: f(&|r| r.minflt_per_tx),
        on_huge_pages: reps.iter().all(|r| r.segment.on_huge_pages),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pg::options::tests::spec;

    #[test]
    fn a_pool_too_small_for_huge_pages_on_is_a_skip_with_the_callers_hint() {
        // More pages than any pool has free.
        let Err(Skip(status, why)) =
            reserve(HugePages::On, Some(1 << 40), &spec(), false, "GROW IT")
        else {
            panic!("not skipped");
        };
        assert_eq!(status, Status::Skipped);
        assert!(
            why.starts_with("huge_pages=on needs 1099511627776 free 2048 kB pages"),
            "{why}"
        );
        assert!(why.ends_with(": GROW IT"), "{why}");
        // huge_pages=try runs on whatever it gets; off needs nothing.
        assert!(reserve(HugePages::Try, Some(1 << 40), &spec(), false, "").is_ok());
        assert!(reserve(HugePages::Off, Some(1 << 40), &spec(), false, "").is_ok());
    }

    #[test]
    fn server_settings_put_user_settings_last_and_keep_one_of_each() {
        let mut s = spec();
        s.settings = vec![
            ("max_connections".into(), "500".into()),
            ("work_mem".into(), "8MB".into()),
        ];
        let got = server_settings(&s, "2GB", HugePages::On, 32);
        assert_eq!(
            got,
            vec![
                (
                    "cluster_name".to_string(),
                    "preemptlab-throwaway".to_string()
                ),
                ("shared_buffers".into(), "2GB".into()),
                ("huge_pages".into(), "on".into()),
                ("max_connections".into(), "500".into()),
                ("work_mem".into(), "8MB".into()),
            ]
        );
    }
}
