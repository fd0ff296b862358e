//! What the window keeps while it runs: each observed instance and its accumulating counts ([`Inst`]), the
//! processes followed ([`State`]), and how each perf record and each /proc scan is folded into them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use results::diagnose::{ByType, Categories, Context, Second, Segment, Totals};

use crate::classify::{self, Category, SwitchKind};
use crate::perf::Event;
use crate::procs::{self, Counters, Proc, Reaped, UNCLASSIFIED};
use crate::symbolize::Symbolize;

/// Callers kept above a spinlock sample's leaf.
pub(crate) const CALLERS: usize = 4;

/// One observed instance while the window runs.
pub(crate) struct Inst {
    pub(crate) pm: u32,
    pub(crate) pm_title: String,
    pub(crate) seg: Option<(u64, u64)>,
    pub(crate) segment: Option<Segment>,
    pub(crate) reaped: Reaped,
    pub(crate) series: Vec<Second>,
    pub(crate) totals: Totals,
    pub(crate) by_type: BTreeMap<String, ByType>,
    pub(crate) funcs: HashMap<String, (Category, u64)>,
    pub(crate) exited_at_s: Option<f64>,
    pub(crate) dsn: Option<String>,
    pub(crate) context: Context,
    pub(crate) data_dir: Option<String>,
    pub(crate) version: Option<String>,
    pub(crate) port: Option<u16>,
    /// With a cgroup scope: the cgroup2 path the events watch for this instance.
    pub(crate) cgroup: Option<String>,
    /// Its processes found outside that cgroup (the events missed them).
    pub(crate) outside: BTreeSet<u32>,
    /// Whether the postmaster's executable keeps frame pointers (None: not known).
    pub(crate) frame_pointers: Option<bool>,
    /// The postmaster's executable as read at the start.
    pub(crate) binary: Option<results::diagnose::Binary>,
    /// Spinlock samples by their leaf and callers (`s_lock <- StrategyGetBuffer <- ...`), when the
    /// executable keeps frame pointers.
    pub(crate) spin_callers: HashMap<String, u64>,
}

impl Inst {
    pub(crate) fn second(&mut self, idx: usize) -> &mut Second {
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
    pub(crate) fn fold(&mut self, p: Proc) {
        let kind = p.kind.unwrap_or_else(|| UNCLASSIFIED.to_string());
        let t = self.by_type.entry(kind.clone()).or_insert_with(|| ByType {
            process_type: kind.clone(),
            ..ByType::default()
        });
        t.processes += 1;
        if p.by_stack {
            *t.typed_by_stack.get_or_insert(0) += 1;
        }
        procs::add_categories(&mut t.cpu, &p.cpu);
        t.segment_faults += p.segment_faults;
        procs::add_switches(&mut t.switches, &p.switches);
        procs::add_categories(&mut self.totals.cpu, &p.cpu);
        if kind == "client backend" || kind == UNCLASSIFIED {
            procs::add_categories(&mut self.totals.client_cpu, &p.cpu);
        }
    }
}

/// Everything the loop keeps.
pub(crate) struct State {
    pub(crate) insts: Vec<Inst>,
    pub(crate) procs: HashMap<u32, Proc>,
    /// Our own `--pg` backends: never counted.
    pub(crate) exclude: HashSet<u32>,
    /// PIDs seen this second that belong to no instance (cleared each second).
    pub(crate) foreign: HashSet<u32>,
    pub(crate) t0_ns: u64,
    pub(crate) lost: u64,
    /// Records that could not be decoded.
    pub(crate) unparsed: u64,
    /// On-CPU samples of every task (idle and other processes included): the machine's.
    pub(crate) cpu_samples_all: u64,
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
    /// through the process's own (a library it loaded itself).
    fn user_name(&self, sym: &mut dyn Symbolize, pid: u32, inst: usize, ip: u64) -> String {
        sym.user(self.insts[inst].pm, pid, ip)
            .unwrap_or_else(|| "?".into())
    }

    /// `leaf <- caller <- ...`: the callers above a spinlock sample's leaf, from the frame-pointer walk
    /// of its user stack ([`CALLERS`] at most), each named by [`Self::return_name`].
    fn callers(
        &self,
        sym: &mut dyn Symbolize,
        pid: u32,
        inst: usize,
        leaf: &str,
        above: &[u64],
    ) -> String {
        let mut chain = leaf.to_string();
        for &ret in above.iter().take(CALLERS) {
            chain.push_str(" <- ");
            chain.push_str(&self.return_name(sym, pid, inst, ret));
        }
        chain
    }

    /// The function a return address of the frame-pointer walk is in, named one byte back, inside the
    /// call instruction (a call that ends its function returns to the next one).
    fn return_name(&self, sym: &mut dyn Symbolize, pid: u32, inst: usize, ret: u64) -> String {
        self.user_name(sym, pid, inst, ret.saturating_sub(1))
    }

    /// Types a process whose title is still unread from the functions on one of its sampled user stacks
    /// (the leaf, then the callers the frame-pointer walk found), where the executable keeps frame pointers: a backend that lived a few milliseconds exits
    /// before any title read, and its samples are the only trace of what it was.
    fn type_by_stack(&mut self, sym: &mut dyn Symbolize, pid: u32, inst: usize, user: &[u64]) {
        let untyped = self.procs.get(&pid).is_some_and(|p| p.kind.is_none());
        if !untyped || self.insts[inst].frame_pointers != Some(true) || user.len() < 2 {
            return;
        }
        let mut names = vec![self.user_name(sym, pid, inst, user[0])];
        names.extend(
            user[1..]
                .iter()
                .map(|&r| self.return_name(sym, pid, inst, r)),
        );
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        if let Some(kind) = classify::kind_from_stack(&names) {
            let p = self.procs.get_mut(&pid).expect("checked above");
            p.kind = Some(kind.to_string());
            p.by_stack = true;
        }
    }

    fn kernel_names<'a>(k: &'a dyn Symbolize, frames: &[u64]) -> Vec<&'a str> {
        if !k.kernel_available() {
            return Vec::new();
        }
        frames.iter().map(|&a| k.kernel(a).unwrap_or("?")).collect()
    }

    /// Reads again the title of the processes whose kind is still unknown (a new process shows the
    /// postmaster's title until it sets its own), at every drain of the rings: a process that lives less
    /// than a second (an autovacuum worker on a small database) is then typed while it lives, not left
    /// "short-lived (title unread)" by the second's scan. A process whose title cannot be read any more
    /// (exited: its command line is gone) is not tried again.
    pub(crate) fn title_untitled(&mut self) {
        for (pid, p) in self
            .procs
            .iter_mut()
            .filter(|(_, p)| (p.kind.is_none() || p.by_stack) && !p.title_gone)
        {
            // A title, once the process has set its own, overrules a kind read from a stack.
            match procs::title(*pid).filter(|t| !t.is_empty()) {
                Some(t) => {
                    if let Some(k) = procs::kind_of(&t, &self.insts[p.inst].pm_title) {
                        p.kind = Some(k);
                        p.by_stack = false;
                    }
                }
                None => p.title_gone = true,
            }
        }
    }

    pub(crate) fn event(&mut self, e: Event, sym: &mut dyn Symbolize) {
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
            Event::Unparsed(n) => self.unparsed += n,
            Event::Cpu {
                pid,
                time_ns,
                kernel,
                user,
            } => {
                self.cpu_samples_all += 1;
                if !self.member(pid, time_ns) {
                    return;
                }
                let user_leaf = user.first().copied();
                let idx = self.procs[&pid].inst;
                let (in_kernel, kernel_cat, kernel_func) = {
                    let names = Self::kernel_names(sym, &kernel);
                    let user_time = user_leaf.is_some() && classify::interrupted_user(&names);
                    let cat = if sym.kernel_available() {
                        classify::kernel_category(&names)
                    } else {
                        Category::KernelOther
                    };
                    (
                        !kernel.is_empty() && !user_time,
                        cat,
                        format!("[k] {}", names.first().copied().unwrap_or("?")),
                    )
                };
                let (cat, func) = if in_kernel {
                    (kernel_cat, kernel_func)
                } else {
                    let name = match user_leaf {
                        Some(ip) => self.user_name(sym, pid, idx, ip),
                        None => "?".into(),
                    };
                    if !name.ends_with('?') {
                        *self.insts[idx].totals.user_samples_named.get_or_insert(0) += 1;
                    }
                    (classify::user_category(&name), name)
                };
                self.type_by_stack(sym, pid, idx, &user);
                if cat == Category::Spinlock && self.insts[idx].frame_pointers == Some(true) {
                    let chain = self.callers(sym, pid, idx, &func, &user[1..]);
                    *self.insts[idx].spin_callers.entry(chain).or_insert(0) += 1;
                }
                let s = self.sec(time_ns);
                let p = self.procs.get_mut(&pid).expect("member");
                bump(&mut p.cpu, cat);
                let inst = &mut self.insts[idx];
                bump(&mut inst.second(s).cpu, cat);
                inst.funcs.entry(func).or_insert((cat, 0)).1 += 1;
            }
            Event::Fault {
                pid,
                time_ns,
                addr,
                weight: n,
                user,
            } => {
                if !self.member(pid, time_ns) {
                    return;
                }
                let idx = self.procs[&pid].inst;
                self.type_by_stack(sym, pid, idx, &user);
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
                let names = Self::kernel_names(sym, &kernel);
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
    pub(crate) fn scan(&mut self, idx: usize, t_s: f64) {
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
            let inst = p.inst;
            self.check_cgroup(inst, pid);
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

    /// With a cgroup scope, notes a process of the instance that runs outside the watched cgroup.
    fn check_cgroup(&mut self, inst: usize, pid: u32) {
        let i = &mut self.insts[inst];
        let Some(dir) = &i.cgroup else {
            return;
        };
        if let Some(path) = crate::cgroup::of_pid(pid) {
            if !crate::cgroup::within(&path, dir) {
                i.outside.insert(pid);
            }
        }
    }

    /// The first scan: every process there when the window opens, read as its baseline.
    pub(crate) fn baseline(&mut self) {
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
            self.check_cgroup(inst, pid);
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
