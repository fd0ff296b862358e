//! Findings: what the facts mean for PostgreSQL on this host, each with evidence and the exact fix.
//!
//! The rules and their thresholds are listed in docs/audit.md ("Findings"). They are pure functions of the
//! facts, so fixtures drive them in tests.

use results::host::findings::{Finding, PoolFix, Severity, Verdict};

use crate::parse::{self};
use results::host::bytes::Bytes;
use results::host::hugepages::PoolTarget;
use results::host::kernel::{KernelFacts, PreemptModel};
use results::host::memory::MemoryFacts;
use results::host::pgquery::ServerInfo;
use results::host::postgres::PgInstance;

/// Page tables above this share of an instance's shared memory: warn.
pub const PT_SHARE_OF_SHM_WARN: f64 = 0.10;
/// Page tables (full touch, at max_connections) above this share of RAM: warn.
pub const PT_FULL_TOUCH_SHARE_OF_RAM_WARN: f64 = 0.25;
/// Page tables of an instance above this share of RAM now: critical (the OOM risk of docs/references.md#page-table-cost).
pub const PT_SHARE_OF_RAM_CRITICAL: f64 = 0.10;

/// The verdict for a set of findings.
pub fn verdict(findings: &[Finding]) -> Verdict {
    match findings.iter().map(|f| f.severity).max() {
        Some(Severity::Critical) => Verdict::AtRisk,
        Some(Severity::Warn) => Verdict::Warn,
        _ => Verdict::Ok,
    }
}

fn kib(k: u64) -> String {
    Bytes::from_kib(k).to_string()
}

/// The pool fix for an instance: its own need and the host's target at its page size, from the host's
/// pool targets ([`crate::hugepages::target`]).
pub fn pool_fix(inst: &PgInstance, targets: &[PoolTarget]) -> Option<PoolFix> {
    let (t, need) = targets
        .iter()
        .find_map(|t| t.need_of(inst.postmaster_pid).map(|n| (t, n)))?;
    Some(PoolFix {
        page_size_kib: t.page_size_kib,
        pages_needed: need.pages_needed,
        pool_target: t.target,
        basis: need.basis.kind().into(),
        basis_detail: need.basis.describe(),
        commands: t.commands.clone(),
        describe: t.describe_for(Some(inst.postmaster_pid)),
    })
}

fn fix_huge_pages(inst: &PgInstance, pool: Option<&PoolFix>) -> Vec<String> {
    let mut fix = Vec::new();
    match pool {
        Some(p) => {
            for (i, c) in p.commands.iter().enumerate() {
                fix.push(if i == 0 {
                    format!("{c}   # {}", p.describe)
                } else {
                    c.clone()
                });
            }
        }
        None => fix.push(format!(
            "preemptlab hugepages --pid {}   # the pool size could not be computed here (run as root, or pass --pg DSN); this prints it",
            inst.postmaster_pid
        )),
    }
    fix.push(HUGE_PAGES_ON.into());
    fix.push(RESTART_THEN_AUDIT.into());
    fix
}

/// The title of `preempt-4k-shm` for `inst`: for PostgreSQL 19 and later, what 19 changed (issue 46 item
/// 10): the free list, whose `buffer_strategy_lock` every buffer allocation took in StrategyGetBuffer (9.5-18)
/// and where the Linux 7.0 report found its time, is gone (commit 2c789405275; the lock is taken only when
/// the clock hand wraps); buffer-header spinlocks and the 4 KB pages' page tables remain
/// (docs/references.md#pg19-clock-sweep).
fn exposed_title(inst: &PgInstance) -> String {
    let pm = inst.postmaster_pid;
    let major = inst.version.get().and_then(|v| {
        v.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse::<u32>()
            .ok()
    });
    match major {
        Some(v) if v >= 19 => format!("instance {pm} (PostgreSQL {v}) runs on 4 KB shared memory under a preemptive kernel: 19 removed the buffer free list (commit 2c789405275), so StrategyGetBuffer takes its spinlock only when the clock hand wraps, not on every allocation as in 15-18 where the Linux 7.0 regression was found; buffer-header spinlocks still stall behind a preempted holder, and the page tables remain"),
        _ => format!("instance {pm} runs on 4 KB shared memory under a preemptive kernel: the lock-holder-preemption regression"),
    }
}

/// `run 4242` or `runs 4242, 4343`.
fn ended_runs_named(pids: &[u32]) -> String {
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    match pids.len() {
        1 => format!("run {}", pids[0]),
        _ => format!("runs {}", pids.join(", ")),
    }
}

/// The fix's step in postgresql.conf, which is no shell command: a comment, so that a fix block pasted
/// into a shell runs its commands and nothing else (issue 46 item 12).
pub const HUGE_PAGES_ON: &str =
    "# in postgresql.conf: huge_pages = on (not try: fail at start rather than run on 4 KB pages)";

/// The fix's last step, a restart that depends on how the server is run, then the check: a comment for the
/// same reason as [`HUGE_PAGES_ON`].
pub const RESTART_THEN_AUDIT: &str =
    "# then restart PostgreSQL and run: preemptlab audit (expect 'on huge pages: yes')";

/// Computes every finding.
pub fn findings(
    kernel: &KernelFacts,
    mem: &MemoryFacts,
    instances: &[PgInstance],
    unmatched: &[ServerInfo],
    targets: &[PoolTarget],
) -> Vec<Finding> {
    let k = KernelView::of(kernel);
    let mut out = Vec::new();
    out.extend(k.unknown_model_finding());
    out.extend(preempt_ignored_finding(kernel, &k.model_line));
    if instances.is_empty() {
        out.push(k.no_instance_finding());
    }
    let inconsistent = inconsistent_pools(mem);
    out.extend(inconsistent.iter().map(|p| inconsistent_pool_finding(p)));
    let judged = |page_kib: u64| !inconsistent.iter().any(|p| p.page_size_kib == page_kib);
    for inst in instances {
        let i = InstanceView::of(inst, targets);
        out.extend(k.exposure_findings(&i));
        out.extend(pool_too_small_finding(&i, mem, targets, &judged));
        out.extend(page_tables_finding(&i, mem.total_kib.get().copied()));
    }
    out.extend(thp_findings(mem, !instances.is_empty()));
    out.extend(unused_pool_findings(mem, instances));
    out.extend(rseq_slice_finding(kernel, k.seven, &k.release));
    out.extend(unmatched.iter().map(not_local_finding));
    sort(&mut out);
    out
}

/// What the kernel's findings read: its model, whether it preempts in the kernel, the line that says so.
struct KernelView<'a> {
    kernel: &'a KernelFacts,
    model: PreemptModel,
    release: String,
    /// Linux 7.0 or later.
    seven: bool,
    /// Preempts inside the kernel (or unknown on 7.x, whose models all do).
    preemptive: bool,
    model_line: String,
}

impl<'a> KernelView<'a> {
    fn of(kernel: &'a KernelFacts) -> Self {
        let model = kernel.preemption.model;
        let release = kernel
            .release
            .get()
            .cloned()
            .unwrap_or_else(|| "unknown".into());
        let seven = kernel
            .release
            .get()
            .and_then(|r| parse::kernel_version(r))
            .is_some_and(|v| v >= (7, 0));
        // Unknown with candidates that all preempt (uname -v's PREEMPT: full or lazy) is preemptive.
        let preemptive = kernel.preemption.preempts_in_kernel() == Some(true)
            || (model == PreemptModel::Unknown && seven);
        let model_line = format!(
            "preemption model {} (decided by {}); kernel {release}",
            kernel.preemption.words(),
            kernel
                .preemption
                .decided_by
                .as_deref()
                .unwrap_or("nothing: no source readable")
        );
        KernelView {
            kernel,
            model,
            release,
            seven,
            preemptive,
            model_line,
        }
    }

    /// The model could not be determined.
    fn unknown_model_finding(&self) -> Option<Finding> {
        let (kernel, model) = (self.kernel, self.model);
        if model == PreemptModel::Unknown {
            return Some(Finding {
            id: "preempt-unknown".into(),
            severity: Severity::Info,
            instance: None,
            title: match kernel.preemption.candidates.is_empty() {
                true => "the preemption model could not be determined".into(),
                false => format!(
                    "the preemption model could not be determined: {}",
                    kernel.preemption.words()
                ),
            },
            evidence: kernel
                .preemption
                .evidence
                .iter()
                .map(|e| format!("{}: {}", e.source, e.note.clone().or(e.says.clone()).unwrap_or_default()))
                .collect(),
            fix: vec!["mount -t debugfs none /sys/kernel/debug; preemptlab audit   # as root, with debugfs mounted".into()],
     pool: None,
    });
        }
        None
    }

    /// No instance runs: said, with whether one on 4 KB pages would be exposed here.
    fn no_instance_finding(&self) -> Finding {
        let (preemptive, model_line) = (self.preemptive, &self.model_line);
        Finding {
            id: "no-instance".into(),
            severity: Severity::Info,
            instance: None,
            title: if preemptive {
                "no PostgreSQL running; a PostgreSQL on 4 KB shared memory here would be exposed"
                    .into()
            } else {
                "no PostgreSQL instance running on this host".into()
            },
            evidence: vec![
                model_line.clone(),
                "no postgres/postmaster process without a postgres parent in /proc".into(),
            ],
            fix: vec![],
            pool: None,
        }
    }

    /// An instance on 4 KB shared memory: exposed under a preempting model, upgrade-bound under
    /// none/voluntary, and silently fallen back when it asked `try`.
    fn exposure_findings(&self, i: &InstanceView) -> Vec<Finding> {
        let (preemptive, model, model_line) = (self.preemptive, self.model, &self.model_line);
        let (inst, pm, pool) = (i.inst, i.inst.postmaster_pid, &i.pool);
        let (seg_line, hp_line, hp) = (&i.seg_line, &i.hp_line, i.hp);
        let mut out = Vec::new();
        if i.on_huge == Some(false) {
            if preemptive {
                out.push(Finding {
                    id: "preempt-4k-shm".into(),
                    severity: Severity::Critical,
                    instance: Some(pm),
                    title: exposed_title(inst),
                    evidence: vec![model_line.clone(), seg_line.clone(), hp_line.clone()],
                    fix: fix_huge_pages(inst, pool.as_ref()),
                    pool: pool.clone(),
                });
            } else if matches!(model, PreemptModel::None | PreemptModel::Voluntary) {
                out.push(Finding {
                    id: "preempt-upgrade-4k".into(),
                    severity: Severity::Warn,
                    instance: Some(pm),
                    title: format!("instance {pm} runs on 4 KB shared memory: no collapse is published under '{model}', but Linux 7.0 offers only full/lazy, where it is exposed, and the pages cost page tables now"),
                    evidence: vec![model_line.clone(), seg_line.clone()],
                    fix: fix_huge_pages(inst, pool.as_ref()),
                    pool: pool.clone(),
                });
            }
            if hp == Some("try") {
                out.push(Finding {
                    id: "huge-pages-try-fallback".into(),
                    severity: Severity::Warn,
                    instance: Some(pm),
                    title: format!(
                        "instance {pm} has huge_pages = try and silently fell back to 4 KB pages"
                    ),
                    evidence: vec![hp_line.clone(), seg_line.clone()],
                    fix: fix_huge_pages(inst, pool.as_ref()),
                    pool: pool.clone(),
                });
            }
        }

        out
    }
}

/// What an instance's findings read: its segment and huge_pages lines, its setting, its pool fix.
struct InstanceView<'a> {
    inst: &'a PgInstance,
    on_huge: Option<bool>,
    seg_line: String,
    hp: Option<&'a str>,
    hp_line: String,
    pool: Option<PoolFix>,
}

impl<'a> InstanceView<'a> {
    fn of(inst: &'a PgInstance, targets: &[PoolTarget]) -> Self {
        let seg = inst.segment.get();
        let on_huge = inst.on_huge_pages.get().copied();
        let seg_line = match seg {
            Some(s) => format!(
                "main segment {} ({}) KernelPageSize {} kB ({})",
                s.mapping,
                kib(s.size_kib),
                s.kernel_page_size_kib,
                inst.segment.source
            ),
            None => format!(
                "main segment unknown: {}",
                inst.segment.unavailable.as_deref().unwrap_or("")
            ),
        };
        let huge_pages_setting = inst.settings.get("huge_pages");
        let hp = huge_pages_setting.and_then(|f| f.get()).map(String::as_str);
        let hp_line = huge_pages_setting
            .map(|f| format!("huge_pages = {} ({})", f.describe(|s| s.clone()), f.source))
            .unwrap_or_default();

        let pool = pool_fix(inst, targets);
        InstanceView {
            inst,
            on_huge,
            seg_line,
            hp,
            hp_line,
            pool,
        }
    }
}

/// Pool counters that cannot be one moment's are no ground for sizing (issue 46 item 10: a sysroot's
/// HugePages_Rsvd above HugePages_Free made "it will not start after a restart", CRITICAL).
fn inconsistent_pools(mem: &MemoryFacts) -> Vec<&results::host::memory::HugePool> {
    mem.pools
        .get()
        .map(|p| p.iter().filter(|p| p.inconsistent.is_some()).collect())
        .unwrap_or_default()
}

fn inconsistent_pool_finding(p: &results::host::memory::HugePool) -> Finding {
    Finding {
        id: "hugetlb-counters-inconsistent".into(),
        severity: Severity::Warn,
        instance: None,
        title: format!(
            "the {} pool's counters cannot be as read, so whether instances get their huge pages is not judged",
            kib(p.page_size_kib)
        ),
        evidence: vec![format!(
            "/sys/kernel/mm/hugepages/hugepages-{}kB: {}",
            p.page_size_kib,
            p.inconsistent.as_deref().unwrap_or_default()
        )],
        fix: vec!["preemptlab audit   # on the host itself, where the counters are read together".into()],
        pool: None,
    }
}

/// Will the instance get its huge pages at the next restart? Not when the pool leaves it fewer than it
/// asks for (a pool whose counters are not one moment's is not `judged`).
fn pool_too_small_finding(
    i: &InstanceView,
    mem: &MemoryFacts,
    targets: &[PoolTarget],
    judged: &dyn Fn(u64) -> bool,
) -> Option<Finding> {
    let (inst, pm, pool) = (i.inst, i.inst.postmaster_pid, &i.pool);
    let (hp, on_huge, hp_line) = (i.hp, i.on_huge, &i.hp_line);
    let mut out = None;
    // Pool sizing: will the instance get its huge pages at the next restart?
    if hp == Some("on")
        || (hp == Some("try") && on_huge == Some(true))
        || (hp == Some("try")
            && mem
                .pools
                .get()
                .is_some_and(|p| p.iter().any(|p| p.total > 0)))
    {
        let found = targets.iter().find_map(|t| t.need_of(pm).map(|n| (t, n)));
        if let Some((t, need)) = found.filter(|(t, _)| judged(t.page_size_kib)) {
            let pool_size = t.operators_pool();
            let (room, exact) = t.restart_room(pm).unwrap_or((0, need.pages_exact));
            let others = pool_size.saturating_sub(room);
            if room < exact {
                let on = hp == Some("on");
                let size = kib(t.page_size_kib);
                out = Some(Finding {
                    id: "hugetlb-pool-too-small".into(),
                    severity: if on { Severity::Critical } else { Severity::Warn },
                    instance: Some(pm),
                    title: if on {
                        format!("instance {pm} has huge_pages = on but the {size} pool leaves it {room} of the {exact} pages it needs: it will not start after a restart")
                    } else {
                        format!("instance {pm}: the {size} pool leaves it {room} of the {exact} pages it needs: huge_pages = try will fall back to 4 KB pages")
                    },
                    evidence: vec![
                        hp_line.clone(),
                        format!("needs {exact} pages ({})", need.basis.describe()),
                        format!(
                            "pool hugepages-{}kB: {pool_size} pages{}, {others} of them committed to other users and instances",
                            t.page_size_kib,
                            if t.added_by_preemptlab > 0 {
                                format!(" (without the {} preemptlab runs added for now)", t.added_by_preemptlab)
                            } else {
                                String::new()
                            }
                        ),
                    ],
                    fix: fix_huge_pages(inst, pool.as_ref()),
                    pool: pool.clone(),
                });
            }
        }
    }

    out
}

/// Page tables (docs/references.md#page-table-cost): a share of the shared memory, of RAM if every
/// process touched the whole segment, or of RAM now.
fn page_tables_finding(i: &InstanceView, ram_kib: Option<u64>) -> Option<Finding> {
    let (inst, pm, pool) = (i.inst, i.inst.postmaster_pid, &i.pool);
    let pt = inst.page_tables_kib;
    let mut pt_evidence = vec![format!(
        "sum of VmPTE over {} processes: {}",
        inst.processes.len(),
        kib(pt)
    )];
    let mut pt_sev = None;
    if let Some(shm) = inst.shared_memory_kib() {
        if shm > 0 && pt as f64 > PT_SHARE_OF_SHM_WARN * shm as f64 {
            pt_evidence.push(format!(
                "{:.0}% of its shared memory ({}); threshold {:.0}%",
                100.0 * pt as f64 / shm as f64,
                kib(shm),
                PT_SHARE_OF_SHM_WARN * 100.0
            ));
            pt_sev = Some(Severity::Warn);
        }
    }
    if let (Some(full), Some(ram)) = (inst.page_tables_full_touch_kib.get(), ram_kib) {
        if *full as f64 > PT_FULL_TOUCH_SHARE_OF_RAM_WARN * ram as f64 {
            pt_evidence.push(format!("{} if every process touched the whole segment ({}): {:.0}% of RAM; threshold {:.0}%", kib(*full), inst.page_tables_full_touch_kib.source, 100.0 * *full as f64 / ram as f64, PT_FULL_TOUCH_SHARE_OF_RAM_WARN * 100.0));
            pt_sev = pt_sev.max(Some(Severity::Warn));
        }
    }
    if let Some(ram) = ram_kib {
        if pt as f64 > PT_SHARE_OF_RAM_CRITICAL * ram as f64 {
            pt_evidence.push(format!(
                "{:.1}% of RAM now; threshold {:.0}% (OOM-killer territory)",
                100.0 * pt as f64 / ram as f64,
                PT_SHARE_OF_RAM_CRITICAL * 100.0
            ));
            pt_sev = Some(Severity::Critical);
        }
    }
    if let Some(severity) = pt_sev {
        return Some(Finding {
            id: "page-tables-high".into(),
            severity,
            instance: Some(pm),
            title: format!("instance {pm}: page tables for 4 KB shared memory cost {} and grow with every backend", kib(pt)),
            evidence: pt_evidence,
            fix: fix_huge_pages(inst, pool.as_ref()),
                pool: pool.clone(),
        });
    }
    None
}

/// THP on a database host: `always` for anonymous memory, shared memory that gets THP unasked.
fn thp_findings(mem: &MemoryFacts, db_host: bool) -> Vec<Finding> {
    let mut out = Vec::new();
    let thp_sev = if db_host {
        Severity::Warn
    } else {
        Severity::Info
    };
    if mem.thp_enabled.get().map(String::as_str) == Some("always") {
        out.push(Finding {
            id: "thp-always-anon".into(),
            severity: thp_sev,
            instance: None,
            title: "transparent huge pages are 'always' for anonymous memory: compaction stalls and memory bloat on a database host".into(),
            evidence: vec![format!("{} = always", mem.thp_enabled.source)],
            fix: vec![
                "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled".into(),
                "# persist: transparent_hugepage=madvise on the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub)".into(),
            ],
 pool: None,
});
    }
    if let Some(v) = mem.thp_shmem_enabled.get() {
        if crate::memory::ShmemThp::parse(v).is_some_and(|t| t.unasked_gets_thp()) {
            out.push(Finding {
                id: "thp-always-shmem".into(),
                severity: thp_sev,
                instance: None,
                title: format!("shared-memory THP is '{v}': PostgreSQL's segment gets THP by chance, not reliably; use hugetlb pages"),
                evidence: vec![format!("{} = {v}", mem.thp_shmem_enabled.source)],
                fix: vec![
                    "echo never > /sys/kernel/mm/transparent_hugepage/shmem_enabled".into(),
                    "# persist: transparent_hugepage_shmem=never on the kernel command line (6.12+; GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub)".into(),
                ],
 pool: None,
});
        }
    }

    out
}

/// Reserved pools nobody uses (a pool only preemptlab's own running benches grew is theirs for now).
fn unused_pool_findings(mem: &MemoryFacts, instances: &[PgInstance]) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(pools) = mem.pools.get() {
        // A pool that only preemptlab's own running benches grew is theirs for the moment, not unused.
        for p in pools
            .iter()
            .filter(|p| p.total > p.held_by_preemptlab && p.committed_by_users() == 0)
        {
            let candidates: Vec<String> = instances
                .iter()
                .filter(|i| i.on_huge_pages.get() == Some(&false))
                .map(|i| i.postmaster_pid.to_string())
                .collect();
            let mut title = format!(
                "{} huge pages of {} ({}) are reserved and nobody uses them",
                p.total,
                kib(p.page_size_kib),
                kib(p.pinned_kib())
            );
            let mut evidence = vec![format!(
                "/sys/kernel/mm/hugepages/hugepages-{}kB: total {}, free {}, reserved {}",
                p.page_size_kib, p.total, p.free, p.reserved
            )];
            let mut fix = if candidates.is_empty() {
                vec![format!("echo 0 > /sys/kernel/mm/hugepages/hugepages-{}kB/nr_hugepages   # release it (and remove it from /etc/sysctl.d)", p.page_size_kib)]
            } else {
                vec![
                    format!("# instances on 4 KB pages that could use it: {}; set huge_pages = on and restart them", candidates.join(", ")),
                    format!("echo 0 > /sys/kernel/mm/hugepages/hugepages-{}kB/nr_hugepages   # or release it", p.page_size_kib),
                ]
            };
            // Pages a killed preemptlab run left: said as such, with what gives them back (issue 46 item 7).
            if let Some(e) = &p.left_by_ended_runs {
                let runs = ended_runs_named(&e.pids);
                title = format!("{title}: {} of them added by preemptlab {runs}, which ended without giving them back", e.pages);
                evidence.push(format!(
                    "{}: {runs} added {} pages and no longer runs",
                    e.record, e.pages
                ));
                fix = vec![
                    format!("# the next preemptlab bench (bench lock, bench pg, check) gives the {} pages back when it starts", e.pages),
                    format!("echo {} > /sys/kernel/mm/hugepages/hugepages-{}kB/nr_hugepages   # or now: the pool before {runs} grew it", p.persistent().saturating_sub(e.pages), p.page_size_kib),
                ];
            }
            out.push(Finding {
                id: "hugetlb-pool-unused".into(),
                severity: Severity::Warn,
                instance: None,
                title,
                evidence,
                fix,
                pool: None,
            });
        }
    }

    out
}

/// A server named with --pg whose backend is not a process of this host.
fn not_local_finding(s: &ServerInfo) -> Finding {
    Finding {
        id: "pg-server-not-local".into(),
        severity: Severity::Info,
        instance: None,
        title: format!("{}: its backend (pid {}) is not a process of this host; settings shown, OS facts not", s.dsn, s.backend_pid),
        evidence: vec!["pg_backend_pid() not found among the children of a local postmaster (remote host or another PID namespace)".into()],
        fix: vec![],
 pool: None,
}
}

/// Findings in the audit's order: most severe first, then by id.
pub fn sort(findings: &mut [Finding]) {
    findings.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.id.cmp(&b.id)));
}

/// `pg-query-failed` (warn): a `--pg` server could not be asked. The rest of the audit stands (the
/// instances are still found and sized from /proc), without the server's own figures.
pub fn pg_query_failed(f: &results::host::pgquery::PgFailure) -> Finding {
    let peer = f.error.contains("Peer authentication failed");
    let mut fix = vec![format!(
        "psql '{}' -c 'SELECT 1'   # as the user the audit runs as: PostgreSQL's own client gives the same error",
        f.dsn
    )];
    if peer {
        fix.push("peer authentication admits the OS user of the same name: connect over the unix socket (host=/var/run/postgresql user=postgres), as root (preemptlab then connects as that OS user) or as that user".into());
    } else {
        fix.push("Debian's default for local connections is peer authentication: a unix-socket DSN with an OS user's name, as root (host=/var/run/postgresql user=postgres)".into());
    }
    Finding {
        id: "pg-query-failed".into(),
        severity: Severity::Warn,
        instance: None,
        title: format!(
            "{}: the server could not be asked, so the audit goes without its own figures (the instances are still audited from /proc)",
            f.dsn
        ),
        evidence: vec![f.error.clone()],
        fix,
        pool: None,
    }
}

/// `preempt-mode-ignored` (warn): `preempt=` on the kernel command line names a mode this kernel does not
/// follow (one it does not offer: Linux 7.0+ on x86, arm64, powerpc, riscv, s390 and loongarch offers only
/// `full` and `lazy`; or any mode on a kernel without PREEMPT_DYNAMIC). An operator who booted
/// `preempt=none` on older advice believes the kernel runs `none`; it runs its default.
fn preempt_ignored_finding(kernel: &KernelFacts, model_line: &str) -> Option<Finding> {
    let ig = kernel.preemption.ignored_cmdline.as_ref()?;
    let runs = match ig.runs {
        PreemptModel::Unknown => "its built default".to_string(),
        m => format!("'{m}'"),
    };
    let offered = ig
        .offered
        .iter()
        .map(|m| m.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let mut evidence = vec![
        format!("preempt={} ({})", ig.asked, kernel.cmdline.source),
        format!("ignored: {}", ig.why),
        format!("offered: {offered} ({})", kernel.preemption.offered_source),
    ];
    if ig.refused_in_boot_log {
        evidence.push(format!(
            "boot log: \"Dynamic Preempt: unsupported mode: {}\"",
            ig.asked
        ));
    }
    evidence.push(model_line.to_string());
    let mut fix = vec![format!(
        "# remove preempt={} from the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub): this kernel does not follow it",
        ig.asked
    )];
    if ig.none_unavailable {
        evidence.push(
            "no boot parameter gives 'none' (or 'voluntary') on this kernel: kernel/sched/core.c refuses them where the architecture has lazy preemption (Linux 7.0+) or the kernel is PREEMPT_RT".into(),
        );
        fix.push(
            "preemptlab hugepages   # the fix that works under every model: PostgreSQL's shared memory on huge pages"
                .into(),
        );
    } else if kernel.preemption.dynamic.get() == Some(&false) {
        fix.push(format!(
            "# the kernel has no PREEMPT_DYNAMIC: its model ({}) is built in; another model needs another kernel",
            ig.runs
        ));
    }
    Some(Finding {
        id: "preempt-mode-ignored".into(),
        severity: Severity::Warn,
        instance: None,
        title: format!(
            "the kernel command line asks for preempt={}, which this kernel ignores: it runs {runs}",
            ig.asked
        ),
        evidence,
        fix,
        pool: None,
    })
}

/// `rseq-slice-unavailable` (info): on a 7.x kernel, where the rseq time-slice extension could exist, the
/// probe found it unusable; the fix follows the cause the probe named.
fn rseq_slice_finding(kernel: &KernelFacts, seven: bool, release: &str) -> Option<Finding> {
    if !seven || kernel.rseq_slice_extension.get() != Some(&false) {
        return None;
    }
    let why = kernel
        .rseq_slice_extension_why
        .clone()
        .unwrap_or_else(|| "the probe gave no reason".into());
    let fix = if why.contains("disabled at boot by") {
        vec!["# remove rseq_slice_ext=0 from the kernel command line and reboot".into()]
    } else if why.contains("ENOTSUPP") {
        vec![
            "# boot a kernel built with CONFIG_RSEQ_SLICE_EXTENSION=y (7.0+); Debian's 7.2 is built without it".into(),
            "scripts/kernel-build-rseq   # or measure in a guest: build a kernel with it, then:".into(),
            "preemptlab vm --kernel <that bzImage> -- bench lock --locks pg,rseq".into(),
        ]
    } else if why.contains("registration is") {
        vec!["export GLIBC_TUNABLES=glibc.pthread.rseq=0   # then start the process: it registers its own rseq area".into()]
    } else {
        vec![]
    };
    Some(Finding {
        id: "rseq-slice-unavailable".into(),
        severity: Severity::Info,
        instance: None,
        title: "the rseq time-slice extension (a lock holder asking not to be preempted) is not usable here".into(),
        evidence: vec![format!("kernel {release}: {why}")],
        fix,
        pool: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel_with_rseq(release: &str, ok: bool, why: Option<&str>) -> KernelFacts {
        let mut k =
            crate::kernel::read(&crate::host::Host::at(std::path::Path::new("/nonexistent")));
        k.release = results::host::fact::Fact::known(release.to_string(), "test");
        k.rseq_slice_extension = results::host::fact::Fact::known(ok, "test");
        k.rseq_slice_extension_why = why.map(str::to_string);
        k
    }

    #[test]
    fn rseq_slice_unavailable_only_on_7x_kernels_without_it() {
        let not_built = rseqslice::Unavailable::NotSupported {
            detail: Some("CONFIG_RSEQ_SLICE_EXTENSION is not set in /boot/config-7.2.13".into()),
        }
        .to_string();
        let k = kernel_with_rseq("7.2.13+deb14-amd64", false, Some(&not_built));
        let f = rseq_slice_finding(&k, true, "7.2.13+deb14-amd64").unwrap();
        assert_eq!(
            (f.id.as_str(), f.severity),
            ("rseq-slice-unavailable", Severity::Info)
        );
        assert!(
            f.evidence[0].contains("is not set in /boot/config-7.2.13"),
            "{:?}",
            f.evidence
        );
        assert!(f.fix[0].contains("CONFIG_RSEQ_SLICE_EXTENSION=y"));
        let off = rseqslice::Unavailable::NotSupported {
            detail: rseqslice::enotsupp_detail(None, Some("rseq_slice_ext=0")),
        }
        .to_string();
        let k = kernel_with_rseq("7.2.0", false, Some(&off));
        assert!(rseq_slice_finding(&k, true, "7.2.0").unwrap().fix[0].contains("rseq_slice_ext=0"));
        let short = rseqslice::Unavailable::RegistrationTooShort {
            registered: 32,
            feature_size: 33,
        }
        .to_string();
        let k = kernel_with_rseq("7.2.0", false, Some(&short));
        assert!(rseq_slice_finding(&k, true, "7.2.0").unwrap().fix[0].contains("GLIBC_TUNABLES"));
        // Available, or a 6.x kernel (nothing to offer), or not probed: no finding.
        assert!(
            rseq_slice_finding(&kernel_with_rseq("7.2.0", true, None), true, "7.2.0").is_none()
        );
        assert!(
            rseq_slice_finding(&kernel_with_rseq("6.18.4", false, None), false, "6.18.4").is_none()
        );
        let mut k = kernel_with_rseq("7.2.0", false, None);
        k.rseq_slice_extension = results::host::fact::Fact::unavailable("x", "not probed");
        assert!(rseq_slice_finding(&k, true, "7.2.0").is_none());
    }

    #[test]
    fn huge_page_size_zero_kb_means_default_regression() {
        use results::host::postgres::huge_page_size_kib;
        // pg_settings reports huge_page_size = 0 with unit kB; shown as "0kB" it once became a 0 kB page
        // size and divided by zero.
        assert_eq!(huge_page_size_kib("0kB"), None);
        assert_eq!(huge_page_size_kib("0"), None);
        assert_eq!(huge_page_size_kib("2048"), Some(2048));
        assert_eq!(huge_page_size_kib("1GB"), Some(1 << 20));
        assert_eq!(huge_page_size_kib("bogus"), None);
    }
}
