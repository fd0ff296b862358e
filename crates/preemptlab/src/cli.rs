//! The command line.

use std::path::PathBuf;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use report::export::Format;
use results::host::findings::FailOn;

/// Find, reproduce, measure and fix lock-holder preemption (Linux 7.0 + PostgreSQL on 4 KB pages).
#[derive(Debug, Parser)]
#[command(name = "preemptlab", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The main job: audit + a short reproduction on this host + a verdict and the fixes, in under a minute.
    Check(CheckArgs),
    /// Host and PostgreSQL facts, findings with evidence and the exact fix, a verdict.
    Audit(AuditArgs),
    /// Is lock-holder preemption hurting the PostgreSQL running now? Observes running instances for a
    /// window, read-only: where their CPU goes, page faults on the shared segment, preemptions inside
    /// faults, wait events; a verdict and the audit's fix.
    Diagnose(DiagnoseArgs),
    /// How many huge pages a PostgreSQL instance needs; the sysctl and postgresql.conf lines.
    Hugepages(HugepagesArgs),
    /// Reproduce and measure: lock contention, PostgreSQL, latency, network.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Statistics across result files: centres, spread, signed % change, bootstrap CI, significance.
    Compare(CompareArgs),
    /// List the result files in a directory.
    Results(ResultsArgs),
    /// One self-contained HTML page (inline SVG, no scripts, no network) from result files or a directory.
    Report(ReportArgs),
    /// Discrete-event model of bench lock on any machine: CPUs x workers x preemption model x lock x pages.
    Sim(SimArgs),
    /// Many hosts' audits in one answer: at-risk hosts first, exact huge page fixes, wasted page tables,
    /// stale or failed audits.
    Fleet(FleetArgs),
    /// Writes the man pages or the shell completions into DIR (for packagers; hidden from help).
    #[command(hide = true)]
    Generate(GenerateArgs),
    /// Boot another kernel in a VM (virtme-ng + QEMU) and run any preemptlab command in it.
    Vm(vm::cli::VmArgs),
}

#[derive(Debug, Args)]
pub struct FleetArgs {
    /// Audit files (`preemptlab audit --format json`), or directories searched for *.json.
    #[arg(value_name = "DIR|FILE", required = true)]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = formats(&[Format::Table, Format::Json, Format::Markdown]))]
    pub format: Format,
    /// An audit older than this is stale: a number and a unit (s, m, h, d, w).
    #[arg(long, value_name = "AGE", default_value = "2d")]
    pub stale_after: String,
    /// Judge ages as of this time, in seconds since the Unix epoch (default: now).
    #[arg(long, value_name = "UNIX_SECONDS")]
    pub now: Option<u64>,
    /// Exit with code 1 when a host's verdict is at or above this (warn: warn or at-risk; critical: at-risk).
    #[arg(long, value_parser = fail_on())]
    pub fail_on: Option<FailOn>,
    #[command(flatten)]
    pub color: ColorArgs,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// What to write: `man` (one roff page per command) or `completions` (bash, zsh, fish).
    #[arg(value_enum)]
    pub what: GenerateWhat,
    /// Directory to write into (created if missing).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GenerateWhat {
    Man,
    Completions,
}

#[derive(Debug, Args)]
pub struct SimArgs {
    #[command(flatten)]
    pub opts: lab::simrun::options::SimOptions,
    #[command(flatten)]
    pub result: ResultArgs,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result files (bench, check or audit JSON) or directories of them.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Result files: the first is the baseline, each other one is compared with it. With --by, one file or
    /// several runs of one configuration (pooled).
    #[arg(required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Set the values of this cell field against each other instead of files against files (`--by lock`:
    /// every lock against the first, each cell matched on its other fields); several files are pooled.
    /// `--by preempt` splits the files by the host's preemption model instead (runs under none, lazy, ...).
    #[arg(long, value_name = "FIELD")]
    pub by: Option<String>,
    /// With --by: the value the others are compared with (default: the first that appears).
    #[arg(long, value_name = "VALUE")]
    pub base: Option<String>,
    /// A change counts only when the 95% interval of the ratio clears 1 by more than this (0.02 = 2%).
    #[arg(long, default_value_t = 0.02)]
    pub noise: f64,
    /// Only these metrics (comma-separated names as shown, e.g. "ops/s,acquire p99").
    #[arg(long)]
    pub metrics: Option<String>,
    /// Exit with code 1 when any metric is significantly worse than the baseline.
    #[arg(long)]
    pub fail_on_regression: bool,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = formats(&[Format::Table, Format::Markdown, Format::Json, Format::Csv]))]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct ResultsArgs {
    /// The directory (default: results/).
    #[arg(default_value = "results")]
    pub dir: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Process-shared locks on a PostgreSQL-like buffer free list in shared memory: locks x page backings x workers.
    Lock(BenchLockArgs),
    /// Real PostgreSQL + pgbench (or sysbench, optionally via pgbouncer) in a throwaway cluster:
    /// huge_pages x shared_buffers x clients, page tables sampled every second.
    Pg(BenchPgArgs),
    /// Wakeup latency (cyclictest's method): threads sleep to absolute deadlines under SCHED_OTHER and
    /// SCHED_FIFO, idle or under a load (this tool's lock bench, hackbench, a command).
    Latency(BenchLatencyArgs),
    /// TCP/UDP stream and ping-pong over loopback or a veth pair between two network namespaces, with the
    /// kernel's TCP counters around each cell.
    Net(BenchNetArgs),
}

/// `--out`, `--format` and `--quiet` of every command that writes a result file (the benches and `sim`).
#[derive(Debug, Args)]
pub struct ResultArgs {
    /// The result file (default: results/<command>-<time>.json, e.g. results/bench-lock-<time>.json).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Output format on stdout.
    #[arg(long, default_value = "table", value_parser = formats(&[Format::Table, Format::Json, Format::Markdown]))]
    pub format: Format,
    /// No progress or per-cell lines on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// Every bench's `--switch-preempt`.
#[derive(Debug, Args)]
pub struct SwitchPreemptArgs {
    /// Switch the kernel's preemption model to MODE (none, voluntary, full, lazy) for the run and back
    /// afterwards, Ctrl-C included (root, debugfs mounted, a PREEMPT_DYNAMIC kernel that allows it). Two or
    /// more (none,lazy) make it an axis: every cell runs under each, the model switched between groups of
    /// cells (alternated by round where repetitions run in rounds), and each cell records its model.
    #[arg(long, value_name = "MODE[,MODE...]", value_delimiter = ',')]
    pub switch_preempt: Vec<String>,
}

#[derive(Debug, Args)]
pub struct BenchNetArgs {
    #[command(flatten)]
    pub opts: lab::net::options::NetOptions,
    #[command(flatten)]
    pub preempt: SwitchPreemptArgs,
    #[command(flatten)]
    pub result: ResultArgs,
}

#[derive(Debug, Args)]
pub struct BenchLatencyArgs {
    #[command(flatten)]
    pub opts: lab::latency::options::LatencyOptions,
    #[command(flatten)]
    pub preempt: SwitchPreemptArgs,
    #[command(flatten)]
    pub result: ResultArgs,
}

#[derive(Debug, Args)]
pub struct BenchPgArgs {
    #[command(flatten)]
    pub opts: lab::pg::options::PgOptions,
    #[command(flatten)]
    pub preempt: SwitchPreemptArgs,
    #[command(flatten)]
    pub result: ResultArgs,
}

#[derive(Debug, Args)]
pub struct BenchLockArgs {
    #[command(flatten)]
    pub opts: lab::lock::options::LockOptions,
    #[command(flatten)]
    pub preempt: SwitchPreemptArgs,
    #[command(flatten)]
    pub result: ResultArgs,
}

/// `--sysroot` of the commands that read a host.
#[derive(Debug, Args)]
pub struct SysrootArgs {
    /// Read /proc, /sys, /boot and /dev/kmsg under DIR instead of this host (fixtures, copies of other hosts).
    #[arg(long, value_name = "DIR")]
    pub sysroot: Option<PathBuf>,
}

/// `--color` of every command that prints a table.
#[derive(Debug, Clone, Copy, Args)]
pub struct ColorArgs {
    /// Colour in the table format.
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// A shorter reproduction (under 15 s): fewer and shorter repetitions, wider intervals.
    #[arg(long)]
    pub quick: bool,
    /// Also ask running servers for their settings (read-only; repeatable), as in `audit`.
    #[arg(long = "pg", value_name = "DSN")]
    pub pg: Vec<String>,
    /// Grow the 2 MB hugetlb pool for the huge-page half of the reproduction (root); it is restored
    /// afterwards, Ctrl-C included. Without it, the check uses only free pages the pool already has.
    #[arg(long)]
    pub reserve_hugepages: bool,
    /// Run the synthetic bench even where PostgreSQL runs or others keep the CPUs busy: it takes every
    /// CPU for its duration and slows them meanwhile. Without it such a host gets only what is read-only
    /// (the audit and a short diagnosis of the running instances), and --quick or --reserve-hugepages,
    /// which shape the bench, are refused.
    #[arg(long)]
    pub bench_beside_load: bool,
    /// Exit with code 1 when the audit has a finding at or above this severity (as `audit --fail-on`).
    #[arg(long, value_parser = fail_on())]
    pub fail_on: Option<FailOn>,
    /// Where the reproduction's result file goes (default: results/check-<time>.json).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Also write the HTML report of the check to FILE.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = formats(&[Format::Table, Format::Json]))]
    pub format: Format,
    #[command(flatten)]
    pub color: ColorArgs,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(flatten)]
    pub sysroot: SysrootArgs,
    /// Also ask a running server for its settings, read-only, 5 s connect timeout (repeatable).
    #[arg(long = "pg", value_name = "DSN")]
    pub pg: Vec<String>,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = formats(&[Format::Table, Format::Json, Format::Prometheus]))]
    pub format: Format,
    /// Exit with code 1 when a finding is at or above this severity.
    #[arg(long, value_parser = fail_on())]
    pub fail_on: Option<FailOn>,
    /// Also write the result to FILE, atomically (temp file + rename): in --format json or prometheus,
    /// else JSON. For node_exporter's textfile collector: --format prometheus --out DIR/preemptlab.prom.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The name this host goes by in your inventory (the Ansible role passes inventory_hostname): kept in
    /// the audit, shown by `fleet`, which tells hosts apart by it where they share a kernel host name.
    #[arg(long, value_name = "NAME", value_parser = inventory_name)]
    pub inventory_name: Option<String>,
    #[command(flatten)]
    pub color: ColorArgs,
}

/// `--inventory-name`: a name on one line, without control characters.
fn inventory_name(s: &str) -> Result<String, String> {
    if s.trim().is_empty() || s.chars().any(char::is_control) {
        return Err(format!(
            "{s:?}: give the host's inventory name, one line without control characters"
        ));
    }
    Ok(s.to_string())
}

#[derive(Debug, Args)]
pub struct DiagnoseArgs {
    /// Observe this server (read-only; repeatable): it must run on this host; also samples its wait
    /// events and buffer evictions.
    #[arg(long = "pg", value_name = "DSN")]
    pub pg: Vec<String>,
    /// Observe the instance of this postmaster PID (repeatable). Without --pid and --pg: every instance.
    #[arg(long, value_name = "PID")]
    pub pid: Vec<u32>,
    /// The window: a number and a unit (s, m, h).
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub duration: String,
    /// On-CPU samples per second per CPU while they are on (--cpu-duty).
    #[arg(long, value_name = "HZ", default_value_t = diagnose::DEFAULT_CPU_CLOCK_HZ)]
    pub frequency: u64,
    /// Sample one minor fault in this many at least (counts are scaled back).
    #[arg(long, value_name = "N", default_value_t = diagnose::DEFAULT_FAULT_PERIOD)]
    pub fault_period: u64,
    /// At most about this many fault samples a second: while faults come faster, the period rises above
    /// --fault-period in powers of two, set each second from the second before (what a sample costs
    /// grows with the server's fault rate). 0: no bound.
    #[arg(long, value_name = "N", default_value_t = diagnose::DEFAULT_FAULT_SAMPLES_MAX)]
    pub fault_samples: u64,
    /// At most about this many faults counted a second per CPU: on a server faulting faster, the fault
    /// event is on for half, a fifth or a tenth of each second, chosen each second from the second
    /// before, and its samples count as much more (every fault pays the event's counter while it is
    /// on). 0: on all the time.
    #[arg(long, value_name = "N", default_value_t = diagnose::DEFAULT_FAULT_COUNTS_MAX)]
    pub fault_counts: u64,
    /// Which tasks the perf events watch: every task (system), or the instances' cgroup2 directories
    /// (cgroup: other cgroups' switches and faults pay nothing, switches into or out of the cgroup pay
    /// more); auto is system, which measured cheaper for a server talking to other cgroups.
    #[arg(long, default_value = "auto", value_parser = scope())]
    pub scope: diagnose::Scope,
    /// The perf events to open, comma-separated: cpu (on-CPU samples: the spinlock share), faults
    /// (segment faults), switches (preemptions inside page faults; the dearest on a switch-heavy load:
    /// the tracepoint runs at every context switch on the machine). What is left out is not measured.
    #[arg(long, value_name = "LIST", default_value = "cpu,faults,switches", value_parser = event_set)]
    pub events: diagnose::EventSet,
    /// Percent of each second the switch tracepoint is on (10..100, steps of 10; a new random choice of
    /// 100 ms slots every second): its counts are of that time, its rates divide by it. 100 counts every
    /// switch at the full cost.
    #[arg(long, value_name = "PCT", default_value_t = diagnose::DEFAULT_SWITCH_DUTY_PCT)]
    pub switch_duty: u32,
    /// Percent of each second the on-CPU samples are on (10..100, steps of 10; the same 100 ms slots as
    /// the switch tracepoint's when the two are equal): fewer samples, the same shares. 100, the
    /// default, samples all the time.
    #[arg(long, value_name = "PCT", default_value_t = diagnose::DEFAULT_CPU_DUTY_PCT)]
    pub cpu_duty: u32,
    /// Take `enable`, `disable` and `stop` commands, one a line, from a FIFO or an inherited descriptor,
    /// and answer each with `ack` on ACK once it took effect (as `perf record --control`): `disable` turns
    /// every perf event off (processes are still followed), `enable` on again, `stop` ends the window. The
    /// time off is recorded; rates are of the time on.
    #[arg(long, value_name = "fifo:CTL[,ACK]|fd:CTL[,ACK]", value_parser = control_spec)]
    pub control: Option<diagnose::control::Spec>,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = formats(&[Format::Table, Format::Json, Format::Prometheus]))]
    pub format: Format,
    /// Also write the result to FILE, atomically: in --format json or prometheus, else JSON (the result
    /// file `compare` and `report` read).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Exit with code 1 when an instance's verdict is at or above this (present; cant-tell: present or
    /// too few samples to tell).
    #[arg(long, value_parser = symptom_fail_on())]
    pub fail_on: Option<results::diagnose::FailOn>,
    /// No progress on stderr.
    #[arg(long)]
    pub quiet: bool,
    #[command(flatten)]
    pub color: ColorArgs,
}

#[derive(Debug, Args)]
pub struct HugepagesArgs {
    /// Size for a running server, from its own shared_memory_size_in_huge_pages (read-only).
    #[arg(long = "pg", value_name = "DSN", conflicts_with_all = ["data_dir", "pid", "shared_memory"])]
    pub pg: Option<String>,
    /// Size for a stopped server: runs `postgres -D DIR -C shared_memory_size_in_huge_pages` (PG 15+) as DIR's owner.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["pid", "shared_memory"])]
    pub data_dir: Option<PathBuf>,
    /// Size for the running instance of this postmaster PID (its segment in smaps, else VmPeak).
    #[arg(long, value_name = "PID", conflicts_with = "shared_memory")]
    pub pid: Option<u32>,
    /// Size for this much shared memory, e.g. 120GB: the whole segment (PostgreSQL's shared_memory_size), not shared_buffers.
    #[arg(long, value_name = "SIZE", conflicts_with = "shared_buffers")]
    pub shared_memory: Option<String>,
    /// Size for a server with this shared_buffers (as in postgresql.conf, e.g. 2GB): PostgreSQL's own figure, from a scratch cluster (PG 15+).
    #[arg(long, value_name = "SIZE", conflicts_with_all = ["pg", "data_dir", "pid"])]
    pub shared_buffers: Option<String>,
    /// With --shared-buffers: the server's max_connections (default: PostgreSQL's, 100).
    #[arg(long, value_name = "N", requires = "shared_buffers")]
    pub max_connections: Option<u32>,
    /// Huge page size: 2MB or 1GB (default: the instance's huge_page_size, else the host default).
    #[arg(long, value_name = "SIZE")]
    pub page_size: Option<String>,
    /// Directory of PostgreSQL's binaries (for --data-dir and --shared-buffers).
    #[arg(long, value_name = "DIR")]
    pub pg_bin: Option<PathBuf>,
    /// Grow the pool to the target now (root); reports how many pages the kernel actually gave.
    #[arg(long, conflicts_with = "sysroot")]
    pub apply: bool,
    #[command(flatten)]
    pub sysroot: SysrootArgs,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = formats(&[Format::Table, Format::Json]))]
    pub format: Format,
    #[command(flatten)]
    pub color: ColorArgs,
}

/// `--format`'s parser for a command that offers `offered` (in the order its help lists them): the one
/// [`Format`] of every command, each command naming the formats its document has.
fn formats(offered: &'static [Format]) -> impl TypedValueParser<Value = Format> {
    PossibleValuesParser::new(offered.iter().map(|f| f.name()))
        .map(|name| name.parse::<Format>().expect("a name of Format::ALL"))
}

/// `diagnose --events`'s parser.
fn event_set(s: &str) -> Result<diagnose::EventSet, String> {
    s.parse()
}

/// `diagnose --control`'s parser.
fn control_spec(s: &str) -> Result<diagnose::control::Spec, String> {
    s.parse()
}

/// `diagnose --scope`'s parser: a [`diagnose::Scope`] by its name.
fn scope() -> impl TypedValueParser<Value = diagnose::Scope> {
    PossibleValuesParser::new(diagnose::Scope::ALL.iter().map(|s| s.name())).map(|name| {
        name.parse::<diagnose::Scope>()
            .expect("a name of Scope::ALL")
    })
}

/// `diagnose --fail-on`'s parser: a [`results::diagnose::FailOn`] by its name.
fn symptom_fail_on() -> impl TypedValueParser<Value = results::diagnose::FailOn> {
    use results::diagnose::FailOn;
    PossibleValuesParser::new(FailOn::ALL.iter().map(|f| f.name()))
        .map(|name| name.parse::<FailOn>().expect("a name of FailOn::ALL"))
}

/// `--fail-on`'s parser: a [`FailOn`] by its name.
fn fail_on() -> impl TypedValueParser<Value = FailOn> {
    PossibleValuesParser::new(FailOn::ALL.iter().map(|f| f.name()))
        .map(|name| name.parse::<FailOn>().expect("a name of FailOn::ALL"))
}
