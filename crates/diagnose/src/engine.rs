//! A diagnosis prepared (instances chosen, events opened, servers connected) and each instance judged
//! from what the window gathered ([`crate::window`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use hostfacts::Host;
use results::diagnose::{
    ByType, Context, DiagnoseResult, EventScope, FunctionShare, InstanceDiagnosis, Rates,
    ScopeKind, Segment, Totals, Unmeasured, Waits,
};
use results::host::audit::Audit;
use results::host::postgres::PgInstance;
use results::Envelope;

use crate::cgroup::Plan;
use crate::control::Control;
use crate::perf::{self, Ring};
use crate::procs::{self, Reaped};
use crate::track::{Inst, State};
use crate::{DiagnoseError, Options};

/// Top functions kept in the result.
const TOP_FUNCTIONS: usize = 20;

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
    let binary = crate::binary::inspect(pm);
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
        cgroup: None,
        outside: BTreeSet::new(),
        frame_pointers: binary.as_ref().and_then(|b| b.frame_pointers),
        spin_callers: HashMap::new(),
        binary,
    }
}

/// The rings opened, and what came of it.
struct Opened {
    rings: Vec<Ring>,
    filter: Option<&'static str>,
    ok: Measured,
    scope: EventScope,
}

/// Which events have at least one ring open.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measured {
    pub(crate) cpu: bool,
    pub(crate) faults: bool,
    pub(crate) switches: bool,
}

/// Opens the rings with the scope of `plan`; what cannot be opened becomes an [`Unmeasured`] line.
fn open_rings(opts: &Options, plan: Plan, unmeasured: &mut Vec<Unmeasured>) -> Opened {
    let sw = match crate::tracefs::sched_switch() {
        _ if !opts.events.switches => None,
        Ok(s) => Some(s),
        Err(why) => {
            unmeasured.push(Unmeasured {
                what: "switches while runnable (sched_switch)".into(),
                why: format!("sched:sched_switch: {why}"),
            });
            None
        }
    };
    let cgroups: Vec<String> = plan.dirs.iter().map(|(p, _)| p.clone()).collect();
    let dirs: Vec<Option<&std::fs::File>> = if plan.dirs.is_empty() {
        vec![None]
    } else {
        plan.dirs.iter().map(|(_, f)| Some(f)).collect()
    };
    let (rings, filter, errs) = open_each(opts, sw, &dirs);
    let scope = EventScope {
        kind: plan.kind,
        cgroups,
        why: plan.why,
    };
    let names = [
        "on-CPU samples (cpu-clock)",
        "page-fault samples (page-faults-min)",
        "switches while runnable (sched_switch)",
    ];
    let kept = [opts.events.cpu, opts.events.faults, opts.events.switches];
    for (k, name) in names.iter().enumerate() {
        if !kept[k] {
            unmeasured.push(Unmeasured {
                what: (*name).into(),
                why: format!(
                    "left out (--events {}): not opened, so not measured",
                    opts.events
                ),
            });
        }
    }
    for (k, e) in errs.iter().enumerate() {
        if let Some(why) = e {
            unmeasured.push(Unmeasured {
                what: names[k].into(),
                why: why.clone(),
            });
        }
    }
    let any = |k| rings.iter().any(|r| r.kind == k);
    let ok = Measured {
        cpu: any(perf::Kind::Cpu),
        faults: any(perf::Kind::Fault),
        switches: any(perf::Kind::Switch),
    };
    Opened {
        rings,
        filter,
        ok,
        scope,
    }
}

/// Opens the three events on every online CPU for each of `dirs` (`None`: system-wide); returns the
/// rings, the sched_switch filter the kernel took, and the first error of each event.
fn open_each(
    opts: &Options,
    sw: Option<crate::tracefs::SchedSwitch>,
    dirs: &[Option<&std::fs::File>],
) -> (Vec<Ring>, Option<&'static str>, [Option<String>; 3]) {
    let cpus = perf::online_cpus();
    // 8 MiB over all rings at most, 64 KiB..512 KiB each.
    let kinds = opts.events.names().len().max(1);
    let per = (8usize << 20) / (kinds * cpus.len().max(1) * dirs.len().max(1));
    let ring_bytes = per.clamp(64 << 10, 512 << 10).next_power_of_two() / 2;
    let cfg = perf::Config {
        cpu_clock_hz: opts.cpu_clock_hz,
        fault_period: opts.fault_period,
        ring_bytes: ring_bytes.max(64 << 10),
        max_stack: 64,
    };
    let mut rings = Vec::new();
    let mut first_err: [Option<String>; 3] = [None, None, None];
    let mut filter = None;
    for &dir in dirs {
        for &cpu in &cpus {
            // The cpu-clock ring brings the fork and exit records when it is on all the time; without
            // it, with it on for part of each second, or when --control can turn it off, an always-on
            // dummy event does.
            let whole = opts.cpu_duty_pct >= 100 && opts.control.is_none();
            let mut opened = Vec::new();
            if opts.events.cpu {
                opened.push(perf::open_cpu(cpu, dir, &cfg, whole));
            }
            if !opts.events.cpu || !whole {
                opened.push(perf::open_task(cpu, dir, &cfg));
            }
            for o in opened {
                match o {
                    Ok(r) => rings.push(r),
                    Err(e) => {
                        first_err[0].get_or_insert(perf::explain(&e));
                    }
                }
            }
            if opts.events.faults {
                match perf::open_faults(cpu, dir, &cfg) {
                    Ok(r) => rings.push(r),
                    Err(e) => {
                        first_err[1].get_or_insert(perf::explain(&e));
                    }
                }
            }
            if let Some(sw) = sw {
                match perf::open_switch(cpu, dir, &cfg, sw) {
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
    }
    (rings, filter, first_err)
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
    pub(crate) opts: Options,
    pub(crate) envelope: Envelope,
    pub(crate) state: State,
    pub(crate) rings: Vec<Ring>,
    pub(crate) filter: Option<&'static str>,
    pub(crate) ok: Measured,
    pub(crate) scope: EventScope,
    pub(crate) unmeasured: Vec<Unmeasured>,
    pub(crate) servers: Vec<results::host::pgquery::ServerInfo>,
    pub(crate) clients: Vec<postgres::Client>,
    pub(crate) control: Option<Control>,
}

/// Prepares a diagnosis (see [`Prepared`]); errors as [`run`].
pub fn prepare(opts: &Options, mut envelope: Envelope) -> Result<Prepared, DiagnoseError> {
    opts.check()?;
    envelope.kind = results::Kind::Diagnose;
    let control = match &opts.control {
        Some(spec) => Some(Control::open(spec).map_err(|e| DiagnoseError::Control {
            spec: spec.to_string(),
            why: e.to_string(),
        })?),
        None => None,
    };
    // Connect first and keep the sessions: their backends are how servers are matched to instances.
    let mut clients = Vec::new();
    let mut servers = Vec::new();
    for dsn in &opts.dsns {
        let (info, client) = hostfacts::pgquery::query(dsn)?;
        servers.push(info);
        clients.push(client);
    }
    // Without the per-backend smaps_rollup walks: they were two thirds of diagnose's fixed CPU cost.
    let audit = hostfacts::audit_light(&Host::live(), &servers);
    let chosen = select(&audit, opts)?;
    let mut unmeasured = Vec::new();
    let pms: Vec<u32> = chosen.iter().map(|i| i.postmaster_pid).collect();
    let plan = crate::cgroup::plan(opts.scope, &pms).map_err(|why| DiagnoseError::Scope { why })?;
    let insts: Vec<Inst> = chosen.iter().map(|i| new_inst(&audit, i)).collect();
    let mut state = State {
        insts,
        procs: HashMap::new(),
        // Our own --pg sessions' backends, by their PIDs on this host (a server in a container reports
        // its own namespace's).
        exclude: audit
            .instances
            .iter()
            .filter_map(|i| i.server.as_ref())
            .map(|s| s.host_pid())
            .collect(),
        foreign: HashSet::new(),
        t0_ns: 0,
        lost: 0,
        unparsed: 0,
        cpu_samples_all: 0,
    };
    let o = open_rings(opts, plan, &mut unmeasured);
    if o.scope.kind == ScopeKind::Cgroup {
        for i in state.insts.iter_mut() {
            i.cgroup = crate::cgroup::of_pid(i.pm);
        }
    }
    Ok(Prepared {
        opts: opts.clone(),
        envelope,
        state,
        rings: o.rings,
        filter: o.filter,
        ok: o.ok,
        scope: o.scope,
        unmeasured,
        servers,
        clients,
        control,
    })
}

impl Prepared {
    /// Observes for the window (or until `stop`), then judges.
    pub fn observe(self, stop: &dyn Fn() -> bool, progress: &mut dyn FnMut(f64)) -> DiagnoseResult {
        crate::window::observe(self, stop, progress)
    }
}

/// One instance's diagnosis from what the window gathered.
pub(crate) fn finish(
    mut inst: Inst,
    waits: Option<Waits>,
    observed_s: f64,
    lost: u64,
    ok: Measured,
    (switch_frac, fault_frac): (f64, f64),
) -> InstanceDiagnosis {
    let Measured {
        cpu: cpu_ok,
        faults: fault_ok,
        switches: sw_ok,
    } = ok;
    let window = inst.exited_at_s.unwrap_or(observed_s).max(1e-9);
    inst.totals.lost_records = lost;
    if cpu_ok {
        inst.totals.user_samples_named.get_or_insert(0);
    }
    let t = &inst.totals;
    let rates = Rates {
        segment_faults_per_s: t.segment_faults as f64 / (window * fault_frac),
        other_faults_per_s: t.other_faults as f64 / (window * fault_frac),
        minflt_per_s: t.minflt as f64 / window,
        nivcsw_per_s: t.nivcsw as f64 / window,
        runqueue_wait_ms_per_s: t.runqueue_wait_ms / window,
        preempted_in_fault_per_s: t.switches.runnable_in_fault as f64 / (window * switch_frac),
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
        client_segment_faults_per_s: by_type
            .iter()
            .filter(|b| b.process_type == "client backend")
            .map(|b| b.segment_faults as f64 / (window * fault_frac))
            .sum(),
        other_segment_faults: others_segment_faults(&by_type, window * fault_frac),
        typed_by_stack: by_type
            .iter()
            .filter_map(|b| Some((b.process_type.clone(), b.typed_by_stack?)))
            .collect(),
        faults_measured: fault_ok,
        switches_measured: sw_ok,
        switch_on_pct: (switch_frac * 100.0).round() as u32,
        cpu_measured: cpu_ok,
        fix: inst.context.fix.clone(),
    };
    let verdict = crate::judge::verdict(&inst.totals.client_cpu, &inst.totals.switches, &facts);
    let callers_why = spin_callers_unavailable(&inst, cpu_ok);
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
        spin_callers_unavailable: callers_why,
        spin_callers: spin_callers(std::mem::take(&mut inst.spin_callers)),
        binary: inst.binary,
        waits,
        series: inst.series,
        verdict,
    }
}

/// The segment faults per second of each process type but the client backends', largest first.
fn others_segment_faults(by_type: &[ByType], seconds: f64) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = by_type
        .iter()
        .filter(|b| b.process_type != "client backend" && b.segment_faults > 0)
        .map(|b| (b.process_type.clone(), b.segment_faults as f64 / seconds))
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

/// The spinlock call chains, most first (the top [`TOP_FUNCTIONS`]).
fn spin_callers(chains: HashMap<String, u64>) -> Vec<results::diagnose::CallChain> {
    let total: u64 = chains.values().sum();
    let mut out: Vec<results::diagnose::CallChain> = chains
        .into_iter()
        .map(|(chain, samples)| results::diagnose::CallChain {
            pct: samples as f64 / total.max(1) as f64 * 100.0,
            chain,
            samples,
        })
        .collect();
    out.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.chain.cmp(&b.chain)));
    out.truncate(TOP_FUNCTIONS);
    out
}

/// Why an instance's spinlock callers are not named: no frame pointers in its executable, or it could
/// not be read, or no on-CPU samples.
fn spin_callers_unavailable(inst: &Inst, cpu_ok: bool) -> Option<String> {
    if !cpu_ok {
        return Some("no on-CPU samples".into());
    }
    match &inst.binary {
        None => Some("the postmaster's executable could not be read".into()),
        Some(b) => match b.frame_pointers {
            Some(true) => None,
            Some(false) => Some(format!(
                "{} keeps no frame pointers ({}): the kernel's walk of a user stack finds no callers; a \
                 build with -fno-omit-frame-pointer names them",
                b.path, b.frame_pointer_evidence
            )),
            None => Some(format!("not known whether {} keeps frame pointers ({})", b.path, b.frame_pointer_evidence)),
        },
    }
}
