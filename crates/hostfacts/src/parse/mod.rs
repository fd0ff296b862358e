//! Pure parsers of `/proc`, `/sys`, kernel-config and PostgreSQL text, one module per file read. None of
//! them touches a file; the readers (`crate::host`, `crate::memory`, ...) find the files.
//!
//! Formats: proc(5), proc_pid_smaps(5), `Documentation/admin-guide/mm/transhuge.rst` (bracketed choices),
//! `Documentation/admin-guide/cputopology.rst` (CPU lists), PostgreSQL's `postmaster.pid` layout
//! (`src/include/utils/pidfile.h`) and configuration-file syntax (`guc-file.l`). Sizes as PostgreSQL and a
//! person write them are `results::host::bytes`'; durations as given on the command line are
//! `crate::duration`'s.

mod bootlog;
mod choices;
mod cmdline;
mod cpulist;
mod debugfs_preempt;
mod kconfig;
mod kv;
mod net_snmp;
mod pg_conf;
mod pid_cmdline;
mod pid_stat;
mod postmaster_pid;
mod release;
mod schedstat;
mod smaps;

// Each parser has one path, `hostfacts::parse::NAME`; its module is the file it reads.
pub(crate) use bootlog::latest_boot;
pub use bootlog::{boot_log_preempt, boot_log_refused};
pub use choices::{bracketed, choices};
pub use cmdline::cmdline_param;
pub use cpulist::cpu_list_count;
pub use debugfs_preempt::{active_mode, debugfs_preempt, DebugfsPreemptError};
pub use kconfig::kernel_config;
pub use kv::{kv_kib, kv_text};
pub use net_snmp::net_counters;
pub use pg_conf::pg_conf;
pub use pid_cmdline::{cmdline_args, postmaster_args};
pub use pid_stat::PidStat;
pub use postmaster_pid::{postmaster_pid, PostmasterPid};
pub use release::kernel_version;
pub use schedstat::SchedStat;
pub use smaps::{smaps, SmapsMapping};
