//! The window: open the events, follow the processes, read the rings and /proc second by second, judge.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use hostfacts::postgres::PgInstance;
use hostfacts::{Audit, Host};
use results::diagnose::{
    ByType, Categories, Context, DiagnoseResult, FunctionShare, InstanceDiagnosis, Rates, Second,
    Segment, Spec, Totals, Unmeasured, Waits,
};
use results::Envelope;

use crate::classify::{self, Category, SwitchKind};
use crate::perf::{self, Event, Ring};
use crate::procs::{self, Counters, Proc, Reaped, UNCLASSIFIED};
use crate::symbols::{self, SymbolTable, UserResolver};
use crate::waits;
use crate::{DiagnoseError, Options};

/// Top functions kept in the result.
const TOP_FUNCTIONS: usize = 20;

/// One observed instance while the window runs.
struct Inst {
    pm: u32,
    pm_title: String,
    seg: Option<(u64, u64)>,
    segment: Option<Segment>,
    /// The postmaster's executable mappings, which its forked children share.
    maps: Vec<hostfacts::parse::SmapsMapping>,
    reaped: Reaped,
    series: Vec<Second>,
    totals: Totals,
    by_type: BTreeMap<String, ByType>,
    funcs: HashMap<String, (Category, u64)>,
    exited_at_s: Option<f64>,
    dsn: Option<String>,
    context: Context,
    data_dir: Option<String>,
    version: Option<String>,
    port: Option<u16>,
}

impl Inst {
    fn second(&mut self, idx: usize) -> &mut Second {
        while self.series.len() <= idx {
            let t = self.series.len() as f64 + 1.0;
            self.series.push(Second {
                t_s: t,
                ..Second::default()
            });
        }
        &mut self.series[idx]
    }

    /// Folds a process's counts into the totals by kind (when it is gone, or at the end).
    fn fold(&mut self, p: Proc) {
        let kind = p.kind.unwrap_or_else(|| UNCLASSIFIED.to_string());
        let t = self.by_type.entry(kind.clone()).or_insert_with(|| ByType {
            process_type: kind.clone(),
            ..ByType::default()
        });
        t.processes += 1;
        procs::add_categories(&mut t.cpu, &p.cpu);
        t.segment_faults += p.segment_faults;
        procs::add_switches(&mut t.switches, &p.switches);
        procs::add_categories(&mut self.totals.cpu, &p.cpu);
        if kind == "client backend" || kind == UNCLASSIFIED {
            procs::add_categories(&mut self.totals.client_cpu, &p.cpu);
        }
    }
}

/// The CPUs online (`/sys/devices/system/cpu/online`, e.g. `0-3,6`).
fn online_cpus() -> Vec<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
            out.extend(a..=b);
        }
    }
    if out.is_empty() {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        out.extend(0..n.max(1) as usize);
    }
    out
}

/// Picks the instances to observe; errors for a `--pid` that is no postmaster and a `--pg` that is no
/// local instance.
fn select<'a>(audit: &'a Audit, opts: &Options) -> Result<Vec<&'a PgInstance>, DiagnoseError> {
    let mut out: Vec<&PgInstance> = Vec::new();
    for &pid in &opts.pids {
        match audit.instances.iter().find(|i| i.postmaster_pid == pid) {
            Some(i) => out.push(i),
            None => return Err(not_a_postmaster(pid, audit)),
        }
    }
    if let Some(s) = audit.unmatched_servers.first() {
        return Err(DiagnoseError::Remote { dsn: s.dsn.clone() });
    }
    for i in audit.instances.iter().filter(|i| i.server.is_some()) {
        if !out.iter().any(|o| o.postmaster_pid == i.postmaster_pid) {
            out.push(i);
        }
    }
    if opts.pids.is_empty() && opts.dsns.is_empty() {
        out = audit.instances.iter().collect();
    }
    if out.is_empty() {
        return Err(DiagnoseError::NoInstance);
    }
    Ok(out)
}

fn not_a_postmaster(pid: u32, audit: &Audit) -> DiagnoseError {
    let Some((_, stat)) = procs::read(pid) else {
        return DiagnoseError::NoSuchProcess { pid };
    };
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let what = match audit
        .instances
        .iter()
        .find(|i| i.postmaster_pid == stat.ppid)
    {
        Some(i) => format!(
            "it is a child of postmaster {}: pass --pid {}",
            i.postmaster_pid, i.postmaster_pid
        ),
        None => format!("its name is {name:?}"),
    };
    DiagnoseError::NotPostmaster { pid, what }
}

fn context(audit: &Audit, inst: &PgInstance) -> Context {
    let p = &audit.kernel.preemption;
    let mut fix: Vec<String> = Vec::new();
    let mut findings = Vec::new();
    for f in audit
        .findings
        .iter()
        .filter(|f| f.instance == Some(inst.postmaster_pid))
    {
        findings.push(format!("{} {}: {}", f.severity.as_str(), f.id, f.title));
        for l in &f.fix {
            if !l.starts_with("the same as") && !fix.contains(l) {
                fix.push(l.clone());
            }
        }
    }
    Context {
        preemption_model: p.model.as_str().to_string(),
        preemption_decided_by: p.decided_by.clone(),
        huge_pages: inst
            .settings
            .get("huge_pages")
            .and_then(|f| f.value.clone().map(|v| format!("{v} ({})", f.source))),
        findings,
        fix,
    }
}

fn new_inst(audit: &Audit, i: &PgInstance) -> Inst {
    let pm = i.postmaster_pid;
    let maps = std::fs::read_to_string(format!("/proc/{pm}/maps")).unwrap_or_default();
    let mapping = hostfacts::postgres::main_mapping(&hostfacts::parse::smaps(&maps)).cloned();
    let segment = match (&mapping, i.segment.get()) {
        (Some(m), Some(s)) => Some(Segment {
            mapping: m.path.clone(),
            size_kib: (m.end - m.start) / 1024,
            page_size_kib: s.kernel_page_size_kib,
            on_huge_pages: s.on_huge_pages(),
            source: format!("/proc/{pm}/maps, {}", i.segment.source),
        }),
        _ => None,
    };
    Inst {
        pm,
        pm_title: procs::title(pm).unwrap_or_default(),
        seg: mapping.map(|m| (m.start, m.end)),
        segment,
        maps: symbols::exec_maps(&maps),
        reaped: Reaped::default(),
        series: Vec::new(),
        totals: Totals::default(),
        by_type: BTreeMap::new(),
        funcs: HashMap::new(),
        exited_at_s: None,
        dsn: i.server.as_ref().map(|s| s.dsn.clone()),
        context: context(audit, i),
        data_dir: i.data_dir.value.clone(),
        version: i.version.value.clone(),
        port: i.port.value,
    }
}

/// Everything the loop keeps.
struct State {
    insts: Vec<Inst>,
    procs: HashMap<u32, Proc>,
    /// Our own `--pg` backends: never counted.
    exclude: HashSet<u32>,
    /// PIDs seen this second that belong to no instance (cleared each second).
    foreign: HashSet<u32>,
    kallsyms: Option<SymbolTable>,
    resolver: UserResolver,
    fault_period: u64,
    t0_ns: u64,
    lost: u64,
}

impl State {
    fn inst_of_parent(&self, ppid: u32) -> Option<usize> {
        self.insts
            .iter()
            .position(|i| i.pm == ppid && i.exited_at_s.is_none())
    }

    fn sec(&self, time_ns: u64) -> usize {
        (time_ns.saturating_sub(self.t0_ns) / 1_000_000_000) as usize
    }

    /// Adds a process born in the window (from a fork record or a sample of an unknown PID).
    fn adopt(&mut self, pid: u32, inst: usize, time_ns: u64) {
        if self.exclude.contains(&pid) || self.procs.contains_key(&pid) {
            return;
        }
        let kind = procs::title(pid).and_then(|t| procs::kind_of(&t, &self.insts[inst].pm_title));
        self.procs.insert(pid, Proc::new(inst, kind, false));
        let s = self.sec(time_ns);
        let i = &mut self.insts[inst];
        i.second(s).started += 1;
        i.totals.processes_started += 1;
        i.totals.processes_seen += 1;
    }

    /// The instance process a sample's PID is, adopting it when its parent is a postmaster.
    fn member(&mut self, pid: u32, time_ns: u64) -> bool {
        if self.procs.contains_key(&pid) {
            return true;
        }
        if pid == 0 || self.exclude.contains(&pid) || self.foreign.contains(&pid) {
            return false;
        }
        match procs::read(pid).and_then(|(_, s)| self.inst_of_parent(s.ppid)) {
            Some(inst) => {
                self.adopt(pid, inst, time_ns);
                true
            }
            None => {
                self.foreign.insert(pid);
                false
            }
        }
    }

    /// A user address's function: through the postmaster's mappings (a forked child shares them), else
    /// through the process's own (an exec'd child, a library it loaded itself), read once.
    fn user_name(&mut self, pid: u32, inst: usize, ip: u64) -> String {
        if let Some(n) = self.resolver.name(&self.insts[inst].maps, ip) {
            return n;
        }
        let p = self.procs.get_mut(&pid).expect("member");
        let own = p.maps.get_or_insert_with(|| {
            symbols::exec_maps(
                &std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default(),
            )
        });
        self.resolver.name(own, ip).unwrap_or_else(|| "?".into())
    }

    fn kernel_names<'a>(k: &'a Option<SymbolTable>, frames: &[u64]) -> Vec<&'a str> {
        match k {
            Some(t) => frames
                .iter()
                .map(|&a| t.lookup(a, u64::MAX).unwrap_or("?"))
                .collect(),
            None => Vec::new(),
        }
    }

    fn event(&mut self, e: Event) {
        match e {
            Event::Fork { pid, ppid, time_ns } => {
                if pid != ppid {
                    if let Some(inst) = self.inst_of_parent(ppid) {
                        self.adopt(pid, inst, time_ns);
                    }
                }
            }
            Event::Exit { .. } => {}
            Event::Lost(n) => self.lost += n,
            Event::Cpu {
                pid,
                time_ns,
                kernel,
                user_leaf,
            } => {
                if !self.member(pid, time_ns) {
                    return;
                }
                let names = Self::kernel_names(&self.kallsyms, &kernel);
                let idx = self.procs[&pid].inst;
                let user_time = user_leaf.is_some() && classify::interrupted_user(&names);
                let in_kernel = !kernel.is_empty() && !user_time;
                let (cat, func) = if in_kernel {
                    let cat = if self.kallsyms.is_some() {
                        classify::kernel_category(&names)
                    } else {
                        Category::KernelOther
                    };
                    (
                        cat,
                        format!("[k] {}", names.first().copied().unwrap_or("?")),
                    )
                } else {
                    let name = match user_leaf {
                        Some(ip) => self.user_name(pid, idx, ip),
                        None => "?".into(),
                    };
                    (classify::user_category(&name), name)
                };
                let s = self.sec(time_ns);
                let p = self.procs.get_mut(&pid).expect("member");
                bump(&mut p.cpu, cat);
                let inst = &mut self.insts[idx];
                bump(&mut inst.second(s).cpu, cat);
                inst.funcs.entry(func).or_insert((cat, 0)).1 += 1;
            }
            Event::Fault { pid, time_ns, addr } => {
                if !self.member(pid, time_ns) {
                    return;
                }
                let n = self.fault_period;
                let s = self.sec(time_ns);
                let p = self.procs.get_mut(&pid).expect("member");
                let inst = &mut self.insts[p.inst];
                inst.totals.fault_samples += 1;
                let in_seg = inst.seg.is_some_and(|(a, b)| addr >= a && addr < b);
                if in_seg {
                    p.segment_faults += n;
                    inst.totals.segment_faults += n;
                    inst.second(s).segment_faults += n;
                } else {
                    inst.totals.other_faults += n;
                    inst.second(s).other_faults += n;
                }
            }
            Event::Switch {
                prev_pid,
                prev_state,
                time_ns,
                kernel,
            } => {
                if !classify::runnable(prev_state) || !self.member(prev_pid, time_ns) {
                    return;
                }
                let names = Self::kernel_names(&self.kallsyms, &kernel);
                let s = self.sec(time_ns);
                let p = self.procs.get_mut(&prev_pid).expect("member");
                let mut one = results::diagnose::Switches {
                    runnable: 1,
                    ..Default::default()
                };
                let kind = classify::switch_kind(&names);
                if kind == SwitchKind::KernelPreemption {
                    one.kernel_preemption = 1;
                }
                if classify::has_fault(&names) {
                    one.runnable_in_fault = 1;
                    let handling = classify::handling_fault(&names);
                    match kind {
                        SwitchKind::KernelPreemption if handling => {
                            one.in_fault_kernel_preemption = 1
                        }
                        SwitchKind::Voluntary if handling => one.in_fault_voluntary = 1,
                        SwitchKind::ReturnToUser => one.after_fault_return_to_user = 1,
                        _ => one.in_fault_other = 1,
                    }
                }
                procs::add_switches(&mut p.switches, &one);
                let inst = &mut self.insts[p.inst];
                procs::add_switches(&mut inst.second(s).switches, &one);
                procs::add_switches(&mut inst.totals.switches, &one);
            }
        }
    }

    /// The PIDs to look at in a scan: the postmasters, their children as the kernel lists them
    /// (`/proc/PID/task/PID/children`, one read per instance), and the processes already known; every PID
    /// in /proc when a children list cannot be read (CONFIG_PROC_CHILDREN off).
    fn candidates(&self) -> Vec<u32> {
        let mut out: Vec<u32> = self.procs.keys().copied().collect();
        for i in self.insts.iter().filter(|i| i.exited_at_s.is_none()) {
            out.push(i.pm);
            match std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", i.pm)) {
                Ok(t) => out.extend(t.split_whitespace().filter_map(|w| w.parse::<u32>().ok())),
                Err(_) => {
                    return std::fs::read_dir("/proc")
                        .map(|rd| {
                            rd.filter_map(|e| e.ok())
                                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
                                .collect()
                        })
                        .unwrap_or_default()
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The /proc scan that closes second `idx`: finds new and gone processes, adds the counters' deltas.
    fn scan(&mut self, idx: usize, t_s: f64) {
        self.foreign.clear();
        let mut live: Vec<Vec<(u32, Counters)>> = vec![Vec::new(); self.insts.len()];
        let mut seen: HashSet<u32> = HashSet::new();
        for pid in self.candidates() {
            if self.exclude.contains(&pid) {
                continue;
            }
            let known = self.procs.contains_key(&pid);
            let is_pm = self.insts.iter().any(|i| i.pm == pid);
            if !known && !is_pm {
                // Cheap test first: only stat, for the parent.
                let Some(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|t| hostfacts::parse::PidStat::parse(&t))
                else {
                    continue;
                };
                match self.inst_of_parent(stat.ppid) {
                    Some(inst) => self.adopt(pid, inst, self.t0_ns + idx as u64 * 1_000_000_000),
                    None => continue,
                }
            }
            let Some((c, stat)) = procs::read(pid) else {
                continue;
            };
            if stat.state == 'Z' {
                continue;
            }
            let Some(p) = self.procs.get_mut(&pid) else {
                continue;
            };
            if p.kind.is_none() {
                let pm_title = &self.insts[p.inst].pm_title;
                p.kind = procs::title(pid).and_then(|t| procs::kind_of(&t, pm_title));
            }
            seen.insert(pid);
            live[p.inst].push((pid, c));
        }
        let gone: Vec<u32> = self
            .procs
            .keys()
            .filter(|p| !seen.contains(p))
            .copied()
            .collect();
        let mut gone_last: Vec<Vec<Counters>> = vec![Vec::new(); self.insts.len()];
        for pid in gone {
            let p = self.procs.remove(&pid).expect("listed");
            gone_last[p.inst].push(p.last);
            let inst = p.inst;
            self.insts[inst].fold(p);
        }
        // SAFETY: sysconf has no preconditions.
        let tick_ms = 1000.0 / (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64);
        for (k, inst) in self.insts.iter_mut().enumerate() {
            if inst.exited_at_s.is_some() {
                continue;
            }
            let reaped = match procs::read(inst.pm) {
                Some((_, s)) if s.state != 'Z' => Reaped {
                    minflt: s.cminflt,
                    ticks: s.cutime + s.cstime,
                },
                _ => {
                    inst.exited_at_s = Some(t_s);
                    inst.reaped
                }
            };
            let d = procs::scan_delta(
                &mut self.procs,
                &live[k],
                &gone_last[k],
                inst.reaped,
                reaped,
            );
            inst.reaped = reaped;
            let processes = live[k].len() as u32;
            let s = inst.second(idx);
            s.t_s = t_s;
            s.processes = processes;
            s.minflt += d.minflt;
            s.cpu_ms += d.ticks as f64 * tick_ms;
            s.nvcsw += d.nvcsw;
            s.nivcsw += d.nivcsw;
            s.runqueue_wait_ms += d.wait_ns as f64 / 1e6;
            let t = &mut inst.totals;
            t.minflt += d.minflt;
            t.cpu_ms += d.ticks as f64 * tick_ms;
            t.nvcsw += d.nvcsw;
            t.nivcsw += d.nivcsw;
            t.runqueue_wait_ms += d.wait_ns as f64 / 1e6;
        }
    }

    /// The first scan: every process there when the window opens, read as its baseline.
    fn baseline(&mut self) {
        for pid in self.candidates() {
            if self.exclude.contains(&pid) {
                continue;
            }
            let Some((c, stat)) = procs::read(pid) else {
                continue;
            };
            let inst = match self.insts.iter().position(|i| i.pm == pid) {
                Some(k) => {
                    self.insts[k].reaped = Reaped {
                        minflt: stat.cminflt,
                        ticks: stat.cutime + stat.cstime,
                    };
                    k
                }
                None => match self.inst_of_parent(stat.ppid) {
                    Some(k) => k,
                    None => continue,
                },
            };
            let kind = if self.insts[inst].pm == pid {
                Some("postmaster".to_string())
            } else {
                procs::title(pid).and_then(|t| procs::kind_of(&t, &self.insts[inst].pm_title))
            };
            let mut p = Proc::new(inst, kind, true);
            p.last = c;
            self.procs.insert(pid, p);
            self.insts[inst].totals.processes_seen += 1;
        }
    }
}

fn bump(c: &mut Categories, cat: Category) {
    c.samples += 1;
    match cat {
        Category::Spinlock => c.spinlock += 1,
        Category::Lwlock => c.lwlock += 1,
        Category::PageFault => c.page_fault += 1,
        Category::Scheduler => c.scheduler += 1,
        Category::KernelOther => c.kernel_other += 1,
        Category::UserOther => c.user_other += 1,
    }
}

/// Opens the rings; what cannot be opened becomes an [`Unmeasured`] line.
fn open_rings(
    opts: &Options,
    unmeasured: &mut Vec<Unmeasured>,
) -> (Vec<Ring>, Option<&'static str>, bool, bool) {
    let cpus = online_cpus();
    // 8 MiB over all rings at most, 64 KiB..512 KiB each.
    let per = (8usize << 20) / (3 * cpus.len().max(1));
    let ring_bytes = per.clamp(64 << 10, 512 << 10).next_power_of_two() / 2;
    let cfg = perf::Config {
        cpu_clock_hz: opts.cpu_clock_hz,
        fault_period: opts.fault_period,
        ring_bytes: ring_bytes.max(64 << 10),
        max_stack: 64,
    };
    let mut rings = Vec::new();
    let mut first_err: [Option<String>; 3] = [None, None, None];
    let sw = match crate::tracefs::sched_switch() {
        Ok(s) => Some(s),
        Err(why) => {
            unmeasured.push(Unmeasured {
                what: "switches while runnable (sched_switch)".into(),
                why: format!("sched:sched_switch: {why}"),
            });
            None
        }
    };
    let mut filter = None;
    for &cpu in &cpus {
        match perf::open_cpu(cpu, &cfg) {
            Ok(r) => rings.push(r),
            Err(e) => {
                first_err[0].get_or_insert(perf::explain(&e));
            }
        }
        match perf::open_faults(cpu, &cfg) {
            Ok(r) => rings.push(r),
            Err(e) => {
                first_err[1].get_or_insert(perf::explain(&e));
            }
        }
        if let Some(sw) = sw {
            match perf::open_switch(cpu, &cfg, sw) {
                Ok((r, f)) => {
                    filter = f;
                    rings.push(r)
                }
                Err(e) => {
                    first_err[2].get_or_insert(perf::explain(&e));
                }
            }
        }
    }
    let names = [
        "on-CPU samples (cpu-clock)",
        "page-fault samples (page-faults-min)",
        "switches while runnable (sched_switch)",
    ];
    for (k, e) in first_err.iter().enumerate() {
        if let Some(why) = e {
            unmeasured.push(Unmeasured {
                what: names[k].into(),
                why: why.clone(),
            });
        }
    }
    let cpu_ok = rings.iter().any(|r| r.kind == perf::Kind::Cpu);
    let sw_ok = rings.iter().any(|r| r.kind == perf::Kind::Switch);
    (rings, filter, cpu_ok, sw_ok)
}

fn poll(rings: &[Ring], timeout: Duration) {
    let mut fds: Vec<libc::pollfd> = rings
        .iter()
        .map(|r| libc::pollfd {
            fd: r.fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: fds is a valid array of pollfd of the given length for the duration of the call.
    unsafe {
        libc::poll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            timeout.as_millis().min(1000) as i32,
        )
    };
}

/// Observes the instances for the window and judges them. `stop` ends the window early (the result is
/// then marked interrupted); `progress` gets the seconds observed so far (0 when the window opens). `envelope` is the result's,
/// filled by the caller (`kind` is set here).
pub fn run(
    opts: &Options,
    envelope: Envelope,
    stop: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(f64),
) -> Result<DiagnoseResult, DiagnoseError> {
    Ok(prepare(opts, envelope)?.observe(stop, progress))
}

/// A diagnosis ready to observe: connected, instances chosen, events open (not yet enabled). Preparing
/// reads the audit and the symbol tables, which takes a while on a slow machine; a caller that wants the
/// window to match a measured run (`bench pg --diagnose`) prepares first and observes during the run.
pub struct Prepared {
    opts: Options,
    envelope: Envelope,
    state: State,
    rings: Vec<Ring>,
    filter: Option<&'static str>,
    cpu_ok: bool,
    sw_ok: bool,
    unmeasured: Vec<Unmeasured>,
    servers: Vec<hostfacts::pgquery::ServerInfo>,
    clients: Vec<postgres::Client>,
}

/// Prepares a diagnosis (see [`Prepared`]); errors as [`run`].
pub fn prepare(opts: &Options, mut envelope: Envelope) -> Result<Prepared, DiagnoseError> {
    opts.check()?;
    envelope.kind = "diagnose".into();
    // Connect first and keep the sessions: their backends are how servers are matched to instances.
    let mut clients = Vec::new();
    let mut servers = Vec::new();
    for dsn in &opts.dsns {
        let (info, client) = hostfacts::pgquery::query(dsn)?;
        servers.push(info);
        clients.push(client);
    }
    let audit = hostfacts::audit(&Host::live(), &servers);
    let chosen = select(&audit, opts)?;
    let mut unmeasured = Vec::new();
    let kallsyms = match std::fs::read_to_string("/proc/kallsyms") {
        Ok(t) => symbols::kallsyms(&t),
        Err(_) => None,
    };
    if kallsyms.is_none() {
        unmeasured.push(Unmeasured {
            what:
                "kernel frames by name (page-fault and scheduler shares, how switches came about)"
                    .into(),
            why: "/proc/kallsyms shows no addresses (needs root, or kernel.kptr_restrict < 2)"
                .into(),
        });
    }
    let insts: Vec<Inst> = chosen.iter().map(|i| new_inst(&audit, i)).collect();
    let state = State {
        insts,
        procs: HashMap::new(),
        exclude: servers.iter().map(|s| s.backend_pid).collect(),
        foreign: HashSet::new(),
        kallsyms,
        resolver: UserResolver::default(),
        fault_period: opts.fault_period,
        t0_ns: 0,
        lost: 0,
    };
    let (rings, filter, cpu_ok, sw_ok) = open_rings(opts, &mut unmeasured);
    Ok(Prepared {
        opts: opts.clone(),
        envelope,
        state,
        rings,
        filter,
        cpu_ok,
        sw_ok,
        unmeasured,
        servers,
        clients,
    })
}

impl Prepared {
    /// Observes for the window (or until `stop`), then judges.
    pub fn observe(self, stop: &dyn Fn() -> bool, progress: &mut dyn FnMut(f64)) -> DiagnoseResult {
        observe(self, stop, progress)
    }
}

fn observe(p: Prepared, stop: &dyn Fn() -> bool, progress: &mut dyn FnMut(f64)) -> DiagnoseResult {
    let Prepared {
        opts,
        mut envelope,
        mut state,
        mut rings,
        filter,
        cpu_ok,
        sw_ok,
        unmeasured,
        servers,
        clients,
    } = p;
    let opts = &opts;

    // Wait-event samplers, one thread per --pg server matched to an observed instance.
    let t0 = Instant::now();
    let stop_waits = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<(usize, waits::Read)>();
    let mut threads = Vec::new();
    for (info, client) in servers.iter().zip(clients) {
        let Some(k) = state
            .insts
            .iter()
            .position(|i| i.dsn.as_deref() == Some(info.dsn.as_str()))
        else {
            continue;
        };
        let (stop, tx) = (stop_waits.clone(), tx.clone());
        let interval = opts.wait_interval;
        let (itx, irx) = mpsc::channel();
        let h = std::thread::spawn(move || waits::sample(client, t0, interval, stop, itx));
        let fwd = std::thread::spawn(move || {
            for r in irx {
                if tx.send((k, r)).is_err() {
                    break;
                }
            }
        });
        threads.push((k, info.dsn.clone(), h, fwd));
    }
    drop(tx);

    state.t0_ns = perf::monotonic_ns();
    state.baseline();
    for r in rings.iter_mut() {
        let _ = r.enable();
    }
    progress(0.0);
    let mut events = Vec::new();
    let mut next_second = 1usize;
    let mut interrupted = false;
    loop {
        let elapsed = t0.elapsed();
        let boundary = Duration::from_secs(next_second as u64);
        if elapsed < boundary {
            poll(&rings, (boundary - elapsed).min(Duration::from_millis(100)));
        }
        drain(&mut rings, &mut events, &mut state);
        if t0.elapsed() >= boundary {
            let t_s = t0.elapsed().as_secs_f64();
            state.scan(next_second - 1, t_s);
            progress(t_s);
            next_second += 1;
            if state.insts.iter().all(|i| i.exited_at_s.is_some()) || t0.elapsed() >= opts.duration
            {
                break;
            }
        }
        if stop() {
            interrupted = true;
            break;
        }
    }
    for r in rings.iter_mut() {
        let _ = r.disable();
    }
    drain(&mut rings, &mut events, &mut state);
    let observed_s = t0.elapsed().as_secs_f64();
    if interrupted {
        state.scan(next_second - 1, observed_s);
    }
    drop(rings);
    stop_waits.store(true, Ordering::Relaxed);
    let mut ended: HashMap<usize, (String, waits::Ended)> = HashMap::new();
    for (k, dsn, h, fwd) in threads {
        let e = h.join().unwrap_or_default();
        let _ = fwd.join();
        ended.insert(k, (dsn, e));
    }
    let mut wait_totals: HashMap<usize, BTreeMap<String, u64>> = HashMap::new();
    for (k, r) in rx.try_iter() {
        let idx = (r.t_s as usize).min(state.insts[k].series.len().saturating_sub(1));
        for (e, n) in r.events {
            *state.insts[k]
                .second(idx)
                .waits
                .entry(e.clone())
                .or_insert(0) += n;
            *wait_totals.entry(k).or_default().entry(e).or_insert(0) += n;
        }
    }
    for (pid, p) in std::mem::take(&mut state.procs) {
        let _ = pid;
        let inst = p.inst;
        state.insts[inst].fold(p);
    }
    envelope.interrupted = interrupted;
    let instances = state
        .insts
        .into_iter()
        .enumerate()
        .map(|(k, inst)| {
            let waits = ended.remove(&k).map(|(dsn, e)| {
                finish_waits(
                    dsn,
                    e,
                    wait_totals.remove(&k).unwrap_or_default(),
                    observed_s,
                )
            });
            finish(inst, waits, observed_s, state.lost, cpu_ok, sw_ok)
        })
        .collect();
    DiagnoseResult {
        envelope,
        spec: Spec {
            duration_s: opts.duration.as_secs_f64(),
            observed_s,
            cpu_clock_hz: opts.cpu_clock_hz,
            fault_period: opts.fault_period,
            pids: opts.pids.clone(),
            dsns: opts
                .dsns
                .iter()
                .map(|d| hostfacts::pgquery::redact(d))
                .collect(),
            wait_sample_interval_s: opts.wait_interval.as_secs_f64(),
            sched_switch_filter: filter.map(str::to_string),
        },
        unmeasured,
        instances,
    }
}

fn drain(rings: &mut [Ring], events: &mut Vec<Event>, state: &mut State) {
    for r in rings.iter_mut() {
        r.drain(events);
    }
    // Forks first, so a new backend's samples drained in the same pass find it.
    events.sort_by_key(|e| !matches!(e, Event::Fork { .. }));
    for e in events.drain(..) {
        state.event(e);
    }
}

fn finish_waits(
    dsn: String,
    e: waits::Ended,
    totals: BTreeMap<String, u64>,
    observed_s: f64,
) -> Waits {
    let mut events: Vec<(String, u64)> = totals.into_iter().collect();
    events.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    Waits {
        dsn,
        reads: e.reads,
        backends_seen: events.iter().map(|(_, n)| n).sum(),
        events,
        evictions_per_s: e
            .evictions
            .as_ref()
            .map(|(n, _)| *n as f64 / observed_s.max(1e-9)),
        evictions_source: e.evictions.map(|(_, s)| s),
        note: e.note,
    }
}

fn finish(
    mut inst: Inst,
    waits: Option<Waits>,
    observed_s: f64,
    lost: u64,
    cpu_ok: bool,
    sw_ok: bool,
) -> InstanceDiagnosis {
    let window = inst.exited_at_s.unwrap_or(observed_s).max(1e-9);
    inst.totals.lost_records = lost;
    let t = &inst.totals;
    let rates = Rates {
        segment_faults_per_s: t.segment_faults as f64 / window,
        other_faults_per_s: t.other_faults as f64 / window,
        minflt_per_s: t.minflt as f64 / window,
        nivcsw_per_s: t.nivcsw as f64 / window,
        runqueue_wait_ms_per_s: t.runqueue_wait_ms / window,
        preempted_in_fault_per_s: t.switches.runnable_in_fault as f64 / window,
    };
    let total_samples = t.cpu.samples.max(1) as f64;
    let mut funcs: Vec<FunctionShare> = inst
        .funcs
        .iter()
        .map(|(f, (c, n))| FunctionShare {
            function: f.clone(),
            category: c.as_str().to_string(),
            samples: *n,
            pct: *n as f64 / total_samples * 100.0,
        })
        .collect();
    funcs.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.function.cmp(&b.function)));
    funcs.truncate(TOP_FUNCTIONS);
    let mut by_type: Vec<ByType> = std::mem::take(&mut inst.by_type).into_values().collect();
    by_type.sort_by(|a, b| {
        (b.process_type == "client backend")
            .cmp(&(a.process_type == "client backend"))
            .then(b.cpu.samples.cmp(&a.cpu.samples))
            .then(a.process_type.cmp(&b.process_type))
    });
    let facts = crate::judge::Facts {
        model: &inst.context.preemption_model,
        segment_page_kib: inst.segment.as_ref().map(|s| s.page_size_kib),
        segment_faults_per_s: rates.segment_faults_per_s,
        switches_measured: sw_ok,
        cpu_measured: cpu_ok,
        fix: inst.context.fix.clone(),
    };
    let verdict = crate::judge::verdict(&inst.totals.client_cpu, &inst.totals.switches, &facts);
    InstanceDiagnosis {
        postmaster_pid: inst.pm,
        data_dir: inst.data_dir,
        version: inst.version,
        port: inst.port,
        dsn: inst.dsn,
        segment: inst.segment,
        context: inst.context,
        exited_at_s: inst.exited_at_s,
        totals: inst.totals,
        rates,
        by_type,
        top_functions: funcs,
        waits,
        series: inst.series,
        verdict,
    }
}
