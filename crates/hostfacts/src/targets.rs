//! Which pools `hugepages` sizes, and on what basis: a size given, a stopped data directory, a server asked
//! over a connection, or the running instances (one by postmaster PID, or all). Each target gets its page
//! size (given, else the instance's `huge_page_size`, else the host's default) and a basis.

use std::path::Path;

use crate::hugepages::sizing::{self, SizingError};
use crate::hugepages::target;
use crate::stopped::{self, StoppedError};
use crate::Host;
use results::host::hugepages::Basis;
use results::host::memory::MemoryFacts;
use results::host::pgquery::ServerInfo;
use results::host::postgres::PgInstance;

/// What to size, as asked.
#[derive(Debug, Clone, Default)]
pub struct Request<'a> {
    /// A shared memory size (`120GB`).
    pub shared_memory: Option<&'a str>,
    /// A stopped server's data directory.
    pub data_dir: Option<&'a Path>,
    /// Its binaries (else found by its version).
    pub pg_bin: Option<&'a Path>,
    /// A running postmaster.
    pub pid: Option<u32>,
    /// The huge page size (`2MB`, `1GB`).
    pub page_size: Option<&'a str>,
    /// Whether the servers asked (`servers`) were named by the caller.
    pub asked_servers: bool,
    /// A configuration sized already (`--shared-buffers`: PostgreSQL's own figure on a scratch cluster),
    /// for this host: what it is and its basis.
    pub computed: Option<(String, Basis)>,
}

/// One pool to size.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// What it is for (`instance 1234 (/var/lib/...)`).
    pub label: String,
    /// What the size rests on.
    pub basis: Basis,
    /// Page size, KiB.
    pub page_kib: u64,
    /// Pages of that pool the instance already holds.
    pub own_pages: u64,
    /// Where it runs: a local instance (its postmaster), a size or a stopped data directory for this host,
    /// or a server that is not a process of this host.
    pub place: Place,
}

/// Where a target runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A running instance of this host.
    Instance(u32),
    /// A size or a stopped server, for this host: the running instances still need their pages.
    ThisHost,
    /// A server that is not a process of this host: nothing here shares its pool.
    Elsewhere,
}

/// What `targets` found: the targets and the host's running instances (which share the pool with them).
#[derive(Debug, Clone)]
pub struct Found {
    /// The targets asked for.
    pub targets: Vec<Target>,
    /// Every running instance of the host.
    pub instances: Vec<PgInstance>,
    /// The page size given, if any.
    pub explicit_page_kib: Option<u64>,
}

/// Why no target.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The page size does not parse or is not a huge page size.
    #[error("{value}: {why}")]
    PageSize {
        /// As given.
        value: String,
        /// Why.
        why: String,
    },
    /// The shared memory size does not parse or is zero.
    #[error("{value}: {why}")]
    SharedMemory {
        /// As given.
        value: String,
        /// Why.
        why: String,
    },
    /// The stopped server could not be sized.
    #[error(transparent)]
    Stopped(#[from] StoppedError),
    /// No running postmaster has that PID.
    #[error("{pid}: not a running postmaster")]
    NoSuchPid {
        /// The PID asked for.
        pid: u32,
        /// The postmasters that run.
        running: Vec<u32>,
    },
    /// The servers asked returned nothing.
    #[error("the server returned nothing")]
    NoServer,
    /// A server (not a local process) could not be sized from its own figures.
    #[error(transparent)]
    Server(SizingError),
    /// A local instance could not be sized.
    #[error(transparent)]
    Instance(SizingError),
    /// Nothing to size: no PostgreSQL runs and nothing was named.
    #[error("no running PostgreSQL found")]
    NoneRunning,
}

/// A huge page size: 2 MB or 1 GB, in KiB.
pub fn page_size_kib(s: &str) -> Result<u64, TargetError> {
    let bad = |why: String| TargetError::PageSize {
        value: s.into(),
        why,
    };
    let kib = results::host::bytes::size(s)
        .map_err(|e| bad(e.to_string()))?
        .kib();
    if kib != 2048 && kib != 1 << 20 {
        return Err(bad(
            "use 2MB or 1GB (the x86_64 and arm64 huge page sizes)".into()
        ));
    }
    Ok(kib)
}

/// The targets `req` names on `host` (`servers`: what the servers asked returned).
pub fn targets(
    host: &Host,
    mem: &MemoryFacts,
    req: &Request,
    servers: &[ServerInfo],
) -> Result<Found, TargetError> {
    let default_kib = target::default_page_kib(mem);
    let explicit = req.page_size.map(page_size_kib).transpose()?;
    let page = explicit.unwrap_or(default_kib);
    let (instances, unmatched) = crate::postgres::discover(host, servers);
    let found = |targets: Vec<Target>, instances: Vec<PgInstance>| Found {
        targets,
        instances,
        explicit_page_kib: explicit,
    };
    let target = |label: String, basis: Basis, page_kib: u64, own_pages: u64, place| Target {
        label,
        basis,
        page_kib,
        own_pages,
        place,
    };
    if let Some((label, basis)) = &req.computed {
        let t = target(label.clone(), basis.clone(), page, 0, Place::ThisHost);
        return Ok(found(vec![t], instances));
    }
    if let Some(s) = req.shared_memory {
        let b = results::host::bytes::size(s).map_err(|e| TargetError::SharedMemory {
            value: s.into(),
            why: e.to_string(),
        })?;
        if b.0 == 0 {
            return Err(TargetError::SharedMemory {
                value: s.into(),
                why: "must be more than zero".into(),
            });
        }
        let basis = Basis::Given {
            size_kib: b.0.div_ceil(1024),
        };
        let t = target(
            format!("{s} of shared memory"),
            basis,
            page,
            0,
            Place::ThisHost,
        );
        return Ok(found(vec![t], instances));
    }
    if let Some(dir) = req.data_dir {
        let basis = stopped::basis_for_data_dir(req.pg_bin, dir, page, default_kib)?;
        let label = format!("stopped instance {}", dir.display());
        let t = target(label, basis, page, 0, Place::ThisHost);
        return Ok(found(vec![t], instances));
    }
    let chosen: Vec<&PgInstance> = if let Some(pid) = req.pid {
        let i = instances.iter().find(|i| i.postmaster_pid == pid);
        vec![i.ok_or_else(|| TargetError::NoSuchPid {
            pid,
            running: instances.iter().map(|i| i.postmaster_pid).collect(),
        })?]
    } else if req.asked_servers {
        match instances.iter().find(|i| i.server.is_some()) {
            Some(i) => vec![i],
            None => {
                // A remote server: size from its own figures alone.
                let s = unmatched.first().ok_or(TargetError::NoServer)?;
                let basis =
                    sizing::server_basis(s, page == default_kib).map_err(TargetError::Server)?;
                let t = target(
                    format!("server {}", s.dsn),
                    basis,
                    page,
                    0,
                    Place::Elsewhere,
                );
                return Ok(found(vec![t], instances));
            }
        }
    } else if instances.is_empty() {
        return Err(TargetError::NoneRunning);
    } else {
        instances.iter().collect()
    };
    let mut out = Vec::new();
    for inst in chosen {
        let page = explicit.unwrap_or_else(|| target::page_of(inst, mem));
        let need = target::instance_need(inst, page).map_err(TargetError::Instance)?;
        out.push(target(
            need.label,
            need.basis,
            page,
            need.own_pages,
            Place::Instance(inst.postmaster_pid),
        ));
    }
    Ok(found(out, instances))
}

/// The plan of each target: its own need, and the pool of its host with every running instance at the
/// page size it would use (the targets' instances at the page size given, if one was).
pub fn plans(mem: &MemoryFacts, found: Found) -> Vec<(String, results::host::hugepages::Plan)> {
    let default_kib = target::default_page_kib(mem);
    let chosen: Vec<u32> = found
        .targets
        .iter()
        .filter_map(|t| match t.place {
            Place::Instance(pid) => Some(pid),
            _ => None,
        })
        .collect();
    let page_of = |i: &PgInstance| match found.explicit_page_kib {
        Some(p) if chosen.contains(&i.postmaster_pid) => p,
        _ => target::page_of(i, mem),
    };
    found
        .targets
        .into_iter()
        .map(|t| {
            let host = match t.place {
                Place::Elsewhere => None,
                Place::Instance(_) => Some(target::for_page_size(
                    mem,
                    &found.instances,
                    t.page_kib,
                    &page_of,
                    Vec::new(),
                )),
                Place::ThisHost => {
                    let own = sizing::own_sizing(&t.basis, t.page_kib);
                    let need = results::host::hugepages::Need {
                        label: t.label.clone(),
                        postmaster_pid: None,
                        basis: t.basis.clone(),
                        pages_exact: own.pages_exact,
                        pages_needed: own.pages_needed,
                        own_pages: 0,
                    };
                    Some(target::for_page_size(
                        mem,
                        &found.instances,
                        t.page_kib,
                        &page_of,
                        vec![need],
                    ))
                }
            };
            let pool_now = mem.pool(t.page_kib).cloned();
            let plan = sizing::plan(t.basis, t.page_kib, default_kib, pool_now, host);
            (t.label, plan)
        })
        .collect()
}

/// A warning when a plan would pin most of the host's RAM (over 90%).
pub fn pins_most_ram(
    label: &str,
    plan: &results::host::hugepages::Plan,
    mem: &MemoryFacts,
) -> Option<String> {
    let ram = *mem.total_kib.get()?;
    (plan.pinned_kib as f64 > 0.9 * ram as f64).then(|| {
        format!(
            "{label}: the pool would pin {} of this host's {} of RAM",
            results::host::bytes::Bytes::from_kib(plan.pinned_kib),
            results::host::bytes::Bytes::from_kib(ram)
        )
    })
}
