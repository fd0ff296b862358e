//! The command line.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Find, reproduce, measure and fix lock-holder preemption (Linux 7.0 + PostgreSQL on 4 KB pages).
#[derive(Debug, Parser)]
#[command(name = "preemptlab", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Host and PostgreSQL facts, findings with evidence and the exact fix, a verdict.
    Audit(AuditArgs),
    /// How many huge pages a PostgreSQL instance needs; the sysctl and postgresql.conf lines.
    Hugepages(HugepagesArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuditFormat {
    Table,
    Json,
    Prometheus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlainFormat {
    Table,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    Warn,
    Critical,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Read /proc, /sys, /boot and /dev/kmsg under DIR instead of this host (fixtures, copies of other hosts).
    #[arg(long, value_name = "DIR")]
    pub sysroot: Option<PathBuf>,
    /// Also ask a running server for its settings, read-only, 5 s connect timeout (repeatable).
    #[arg(long = "pg", value_name = "DSN")]
    pub pg: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = AuditFormat::Table)]
    pub format: AuditFormat,
    /// Exit with code 1 when a finding is at or above this severity.
    #[arg(long, value_enum)]
    pub fail_on: Option<FailOn>,
    /// Also write the JSON document to FILE.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Colour in the table format.
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
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
    /// Size for this much shared memory, e.g. 120GB.
    #[arg(long, value_name = "SIZE")]
    pub shared_memory: Option<String>,
    /// Huge page size: 2MB or 1GB (default: the instance's huge_page_size, else the host default).
    #[arg(long, value_name = "SIZE")]
    pub page_size: Option<String>,
    /// Directory of PostgreSQL's binaries (for --data-dir).
    #[arg(long, value_name = "DIR")]
    pub pg_bin: Option<PathBuf>,
    /// Grow the pool to the target now (root); reports how many pages the kernel actually gave.
    #[arg(long)]
    pub apply: bool,
    /// Read host files under DIR instead of this host.
    #[arg(long, value_name = "DIR", conflicts_with = "apply")]
    pub sysroot: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = PlainFormat::Table)]
    pub format: PlainFormat,
    /// Colour in the table format.
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
}
