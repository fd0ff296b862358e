//! `preemptlab hugepages`.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use hostfacts::hugepages::{self, Basis};
use hostfacts::memory::MemoryFacts;
use hostfacts::parse;
use hostfacts::postgres::PgInstance;
use hostfacts::Host;
use results::hugepages::{HugepagesDoc, SizedPlan};

use crate::cli::{HugepagesArgs, PlainFormat};
use crate::term;

fn page_size_arg(s: &str) -> Result<u64> {
    let b = parse::size(s).map_err(|e| anyhow!("--page-size {s}: {e}"))?;
    let kib = b.kib();
    if kib != 2048 && kib != 1 << 20 {
        bail!("--page-size {s}: use 2MB or 1GB (the x86_64 and arm64 huge page sizes)");
    }
    Ok(kib)
}

fn default_page_kib(mem: &MemoryFacts) -> u64 {
    mem.default_huge_page_kib.get().copied().unwrap_or(2048)
}

/// The sizing basis of a stopped server, with the flags that help when it fails.
fn basis_for_data_dir(a: &HugepagesArgs, dir: &Path, page: u64, default: u64) -> Result<Basis> {
    use hostfacts::stopped::{self, StoppedError as E};
    stopped::basis_for_data_dir(a.pg_bin.as_deref(), dir, page, default).map_err(|e| match e {
        E::NotDataDir { .. } | E::Unreadable { .. } | E::OwnedByRoot { .. } => {
            anyhow!("--data-dir {e}")
        }
        E::TooOld { .. } => anyhow!("{e}: start it and use --pid, or pass --shared-memory"),
        E::Failed { .. } => anyhow!("{e} (the server must be stopped for runtime-computed settings; for a running one use --pg or --pid)"),
        e => anyhow!(e),
    })
}

pub fn run(args: HugepagesArgs) -> Result<i32> {
    let host = match &args.sysroot {
        Some(d) if !d.is_dir() => bail!(
            "--sysroot {}: not a directory (give a tree holding proc/ and sys/)",
            d.display()
        ),
        Some(d) => Host::at(d),
        None => Host::live(),
    };
    let mem = hostfacts::audit::memory_facts(&host);
    let default_kib = default_page_kib(&mem);
    let explicit_page = args.page_size.as_deref().map(page_size_arg).transpose()?;
    if args.apply && !hostfacts::host::is_root() {
        bail!("--apply resizes a hugetlb pool and needs root (run with sudo, or drop --apply to only print the plan)");
    }

    let mut targets: Vec<(String, Basis, u64, u64)> = Vec::new(); // (label, basis, page kib, own pages)
    if let Some(s) = &args.shared_memory {
        let b = parse::size(s).map_err(|e| anyhow!("--shared-memory {s}: {e}"))?;
        if b.0 == 0 {
            bail!("--shared-memory {s}: must be more than zero");
        }
        targets.push((
            format!("{s} of shared memory"),
            Basis::Given {
                size_kib: b.0.div_ceil(1024),
            },
            explicit_page.unwrap_or(default_kib),
            0,
        ));
    } else if let Some(dir) = &args.data_dir {
        let page = explicit_page.unwrap_or(default_kib);
        let basis = basis_for_data_dir(&args, dir, page, default_kib)?;
        targets.push((
            format!("stopped instance {}", dir.display()),
            basis,
            page,
            0,
        ));
    } else {
        let sessions = hostfacts::pgquery::query_all(args.pg.as_slice())
            .map_err(anyhow::Error::from)
            .context("--pg")?;
        let (instances, unmatched) = hostfacts::postgres::discover(&host, &sessions.servers);
        drop(sessions);
        let chosen: Vec<&PgInstance> = if let Some(pid) = args.pid {
            let i = instances
                .iter()
                .find(|i| i.postmaster_pid == pid)
                .ok_or_else(|| {
                    let running: Vec<String> = instances
                        .iter()
                        .map(|i| i.postmaster_pid.to_string())
                        .collect();
                    if running.is_empty() {
                        anyhow!("--pid {pid}: not a running postmaster, and no PostgreSQL runs here: pass --shared-memory SIZE or --data-dir DIR")
                    } else {
                        anyhow!("--pid {pid}: not a running postmaster; running: {}", running.join(", "))
                    }
                })?;
            vec![i]
        } else if args.pg.is_some() {
            match instances.iter().find(|i| i.server.is_some()) {
                Some(i) => vec![i],
                None => {
                    // A remote server: size from its own figures alone.
                    let s = unmatched
                        .first()
                        .ok_or_else(|| anyhow!("--pg: the server returned nothing"))?;
                    let page = explicit_page.unwrap_or(default_kib);
                    let basis = hugepages::server_basis(s, page == default_kib)
                        .map_err(|e| anyhow!("--pg {e}; pass --shared-memory"))?;
                    targets.push((format!("server {}", s.dsn), basis, page, 0));
                    vec![]
                }
            }
        } else {
            if instances.is_empty() {
                bail!("no running PostgreSQL found: pass --pg DSN, --pid PID, --data-dir DIR (stopped server) or --shared-memory SIZE");
            }
            instances.iter().collect()
        };
        for inst in chosen {
            let page = explicit_page
                .or_else(|| hostfacts::findings::instance_huge_page_kib(inst, &mem))
                .unwrap_or(default_kib);
            let (basis, own) = hugepages::instance_basis(inst, page)
                .map_err(|e| anyhow!("{e}; run as root or pass --pg DSN"))?;
            let label = format!(
                "instance {} ({})",
                inst.postmaster_pid,
                inst.data_dir.value.as_deref().unwrap_or("?")
            );
            targets.push((label, basis, page, own));
        }
    }

    let mut sized = Vec::new();
    for (label, basis, page, own) in targets {
        let plan = hugepages::plan(basis, page, default_kib, mem.pool(page).cloned(), own);
        if let Some(ram) = mem.total_kib.get() {
            if plan.pinned_kib as f64 > 0.9 * *ram as f64 {
                eprintln!(
                    "preemptlab: warning: {label}: the pool would pin {} of this host's {} of RAM",
                    parse::Bytes::from_kib(plan.pinned_kib),
                    parse::Bytes::from_kib(*ram)
                );
            }
        }
        let applied = if args.apply {
            Some(hugepages::apply(page, plan.pool_target).map_err(|e| anyhow!(e))?)
        } else {
            None
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
    match args.format {
        PlainFormat::Json => print!(
            "{}",
            report::json(&HugepagesDoc {
                schema_version: results::SCHEMA_VERSION,
                kind: results::Kind::Hugepages.name().into(),
                plans: sized
            })
        ),
        PlainFormat::Table => {
            let style = term::style(&args.color);
            for s in &sized {
                print!(
                    "{}",
                    report::hugepages::render_sized(s, style, term::width())
                );
            }
        }
    }
    Ok(if short { 1 } else { 0 })
}
