//! `preemptlab hugepages`: what to size is chosen by `hostfacts::targets`, sized by `hostfacts::hugepages::sizing`.

use anyhow::{anyhow, bail, Context, Result};
use hostfacts::stopped::StoppedError as S;
use hostfacts::targets::{self, Request, TargetError as T};
use hostfacts::Host;
use results::hugepages::{HugepagesDoc, SizedPlan};

use crate::cli::HugepagesArgs;
use crate::term;

/// The library's reason, with the flags that help.
fn explain(e: T) -> anyhow::Error {
    match e {
        T::PageSize { .. } => anyhow!("--page-size {e}"),
        T::SharedMemory { .. } => anyhow!("--shared-memory {e}"),
        T::Stopped(
            S::NotDataDir { .. }
            | S::Unreadable { .. }
            | S::OwnedByRoot { .. }
            | S::BadDataDirectory { .. }
            | S::NoConfig { .. },
        ) => {
            anyhow!("--data-dir {e}")
        }
        T::Stopped(S::TooOld { .. }) => anyhow!("{e}: start it and use --pid, or pass --shared-memory"),
        T::Stopped(S::Failed { ref stderr, ref dir, .. }) => {
            match hostfacts::stopped::postgres_error_fix(stderr, dir) {
                Some(fix) => anyhow!("--data-dir {e} ({fix})"),
                None => anyhow!("--data-dir {e}"),
            }
        }
        T::NoSuchPid { pid, running } if running.is_empty() => anyhow!("--pid {pid}: not a running postmaster, and no PostgreSQL runs here: pass --shared-memory SIZE or --data-dir DIR"),
        T::NoSuchPid { pid, running } => {
            let running: Vec<String> = running.iter().map(u32::to_string).collect();
            anyhow!("--pid {pid}: not a running postmaster; running: {}", running.join(", "))
        }
        T::NoServer => anyhow!("--pg: {e}"),
        T::Server(_) => anyhow!("--pg {e}; pass --shared-memory"),
        T::Instance(_) => anyhow!("{e}; run as root or pass --pg DSN"),
        T::NoneRunning => anyhow!("{e}: pass --pg DSN, --pid PID, --data-dir DIR (stopped server) or --shared-memory SIZE"),
        e => anyhow!(e),
    }
}

/// `--shared-buffers` (and `--max-connections`): the configuration sized by PostgreSQL itself on a scratch
/// cluster (`pgharness::sizing`); its label and basis. The size's syntax is checked before anything runs.
fn settings_basis(
    args: &HugepagesArgs,
    shared_buffers: &str,
    mem: &results::host::memory::MemoryFacts,
) -> Result<(String, results::host::hugepages::Basis)> {
    results::host::bytes::size(shared_buffers).map_err(|e| {
        anyhow!("--shared-buffers {shared_buffers}: {e} (as in postgresql.conf, e.g. 2GB)")
    })?;
    let bin =
        hostfacts::pgbin::find(args.pg_bin.as_deref(), None).map_err(|e| match &args.pg_bin {
            Some(_) => anyhow!("--pg-bin {e}"),
            None => anyhow!("--shared-buffers needs PostgreSQL's binaries: {e}"),
        })?;
    let mut settings = vec![("shared_buffers".to_string(), shared_buffers.to_string())];
    let mut label = format!("shared_buffers {shared_buffers}");
    if let Some(n) = args.max_connections {
        settings.push(("max_connections".into(), n.to_string()));
        label.push_str(&format!(", max_connections {n}"));
    }
    let default_kib = hostfacts::hugepages::target::default_page_kib(mem);
    let page_kib = match &args.page_size {
        Some(p) => targets::page_size_kib(p).map_err(explain)?,
        None => default_kib,
    };
    let basis = pgharness::sizing::basis_for_settings(bin, &settings, page_kib, default_kib)
        .map_err(|e| match e {
            pgharness::sizing::SizingError::Refused { .. } => anyhow!("--shared-buffers: {e}"),
            e => anyhow!(e),
        })?;
    Ok((label, basis))
}

pub fn run(args: HugepagesArgs) -> Result<i32> {
    let host = match &args.sysroot.sysroot {
        Some(d) => Host::at_checked(d).map_err(|e| anyhow!("--sysroot {e}"))?,
        None => Host::live(),
    };
    let mem = hostfacts::audit::memory_facts(&host);
    if let Some(p) = &args.page_size {
        targets::page_size_kib(p).map_err(explain)?;
    }
    if args.apply && !osutil::is_root() {
        bail!("--apply resizes a hugetlb pool and needs root (run with sudo, or drop --apply to only print the plan)");
    }
    let computed = match &args.shared_buffers {
        Some(sb) => Some(settings_basis(&args, sb, &mem)?),
        None => None,
    };
    let req = Request {
        shared_memory: args.shared_memory.as_deref(),
        data_dir: args.data_dir.as_deref(),
        pg_bin: args.pg_bin.as_deref(),
        pid: args.pid,
        page_size: args.page_size.as_deref(),
        asked_servers: args.pg.is_some(),
        computed,
    };
    // (--pg excludes the other sources.) The sessions stay open while we look, so their backends show.
    let dsns: Vec<String> = args.pg.iter().cloned().collect();
    let sessions = hostfacts::pgquery::query_all(&dsns)
        .map_err(anyhow::Error::from)
        .context("--pg")?;
    let found = targets::targets(&host, &mem, &req, &sessions.servers).map_err(explain)?;
    drop(sessions);
    let mut sized = Vec::new();
    // Every plan of one page size has the host's one target: applied once.
    let mut applied_sizes: Vec<(u64, results::host::hugepages::Applied)> = Vec::new();
    for (label, plan) in targets::plans(&mem, found) {
        if let Some(w) = targets::pins_most_ram(&label, &plan, &mem) {
            osutil::msg!("preemptlab: warning: {w}");
        }
        let applied = match args.apply {
            true => Some(
                match applied_sizes.iter().find(|(k, _)| *k == plan.page_size_kib) {
                    Some((_, a)) => a.clone(),
                    None => {
                        let a = hostguard::hugetlb_pool::grow_operators_part(
                            plan.page_size_kib,
                            plan.pool_target,
                        )?;
                        applied_sizes.push((plan.page_size_kib, a.clone()));
                        a
                    }
                },
            ),
            false => None,
        };
        sized.push(SizedPlan {
            target: label,
            plan,
            applied,
        });
    }
    let short = sized
        .iter()
        .any(|s| s.applied.as_ref().is_some_and(|a| a.obtained < a.requested));
    let doc = HugepagesDoc {
        schema_version: results::SCHEMA_VERSION,
        kind: results::Kind::Hugepages.name().into(),
        plans: sized,
    };
    term::stdout(term::render(args.format, Some(&args.color), &doc)?)?;
    Ok(i32::from(short))
}
