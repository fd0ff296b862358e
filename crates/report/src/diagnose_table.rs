//! A diagnosis as text: per instance, where the client backends' CPU went, the page faults on the
//! segment against the kernel's counters, the scheduling counts, the wait events, the verdict and the fix.

use results::diagnose::{Categories, DiagnoseResult, InstanceDiagnosis, Spec, Symptom};

use crate::markup::{columns, field, shown, wrap, Align, Style};
use stats::fmt::rate;
use stats::fmt::sig3;

fn pct(part: u64, of: u64) -> String {
    if of == 0 {
        "-".into()
    } else {
        format!("{:.1}%", part as f64 / of as f64 * 100.0)
    }
}

fn kib(k: u64) -> String {
    if k >= 1 << 20 {
        format!("{} GiB", sig3(k as f64 / (1u64 << 20) as f64))
    } else if k >= 1024 {
        format!("{} MiB", sig3(k as f64 / 1024.0))
    } else {
        format!("{k} KiB")
    }
}

fn page(k: u64) -> String {
    match k {
        4 => "4 KB".into(),
        2048 => "2 MB".into(),
        1048576 => "1 GB".into(),
        k => format!("{k} KB"),
    }
}

fn categories(c: &Categories) -> Vec<Vec<String>> {
    [
        ("spinlock slow path", c.spinlock),
        ("LWLock", c.lwlock),
        ("page-fault handling", c.page_fault),
        ("scheduler", c.scheduler),
        ("other kernel", c.kernel_other),
        ("other user space", c.user_other),
    ]
    .iter()
    .map(|(n, v)| vec![n.to_string(), pct(*v, c.samples), v.to_string()])
    .collect()
}

fn symptom(s: Symptom, st: Style) -> String {
    match s {
        Symptom::Present => st.red("PRESENT"),
        Symptom::NotPresent => st.green("not present"),
        Symptom::CantTell => st.yellow("can't tell"),
    }
}

fn instance(o: &mut String, i: &InstanceDiagnosis, spec: &Spec, st: Style, width: usize) {
    let mut head = format!("Instance {}", i.postmaster_pid);
    let mut what = Vec::new();
    if let Some(v) = &i.version {
        what.push(format!("PostgreSQL {v}"));
    }
    if let Some(d) = &i.data_dir {
        what.push(d.clone());
    }
    if let Some(p) = i.port {
        what.push(format!("port {p}"));
    }
    if !what.is_empty() {
        head.push_str(&format!(" ({})", what.join(", ")));
    }
    o.push_str(&st.bold(&wrap(&head, width, 0, 2)));
    o.push('\n');
    if let Some(t) = i.exited_at_s {
        o.push_str(&field(
            "partial",
            &format!("the postmaster exited {t:.1} s into the window; the counts stop there"),
            width,
        ));
    }
    match &i.segment {
        Some(s) => o.push_str(&field(
            "segment",
            &format!(
                "{} {} on {} pages{}",
                s.mapping,
                kib(s.size_kib),
                page(s.page_size_kib),
                if s.on_huge_pages {
                    ""
                } else {
                    " (not huge pages)"
                }
            ),
            width,
        )),
        None => o.push_str(&field("segment", "not found", width)),
    }
    if let Some(h) = &i.context.huge_pages {
        o.push_str(&field("huge_pages", h, width));
    }
    let t = &i.totals;
    o.push_str(&field(
        "processes",
        &format!(
            "{} seen, {} started during the window",
            t.processes_seen, t.processes_started
        ),
        width,
    ));
    if let Some(b) = &i.binary {
        o.push_str(&field("binary", &binary_line(b), width));
    }
    o.push('\n');

    cpu(o, i, spec, width);
    faults(o, i, spec, width);
    scheduling(o, i, spec, width);
    waits(o, i, width);
    by_type(o, i, width);
    verdict(o, i, st, width);
}

/// Where the client backends' CPU went, and the top functions.
fn cpu(o: &mut String, i: &InstanceDiagnosis, spec: &Spec, width: usize) {
    let t = &i.totals;
    o.push_str(&format!(
        "  Where client backends' CPU went ({} on-CPU samples)\n",
        t.client_cpu.samples
    ));
    o.push_str(&columns(
        &["", "share", "samples"],
        &[Align::Left, Align::Right, Align::Right],
        &categories(&t.client_cpu),
        4,
        width,
    ));
    let v = &i.verdict;
    o.push_str(&format!(
        "    spinlock share 95% interval {:.1}..{:.1}%\n",
        v.spinlock_share.lo_pct, v.spinlock_share.hi_pct
    ));
    if !i.top_functions.is_empty() {
        let of_machine = spec
            .cpu_samples_all
            .filter(|a| *a > 0)
            .map(|a| format!(", {} of the machine's", pct(t.cpu.samples, a)))
            .unwrap_or_default();
        o.push_str(&format!(
            "\n  Top functions (every process, {} samples{of_machine})\n",
            t.cpu.samples
        ));
        let rows: Vec<Vec<String>> = i
            .top_functions
            .iter()
            .take(10)
            .map(|f| {
                vec![
                    format!("{:.1}%", f.pct),
                    shown(&f.function),
                    f.category.replace('_', " "),
                ]
            })
            .collect();
        o.push_str(&columns(
            &["share", "function", "category"],
            &[Align::Right, Align::Left, Align::Left],
            &rows,
            4,
            width,
        ));
    }
    spin_callers(o, i, width);
}

/// Page faults: in the shared segment, elsewhere, the kernel's counters.
fn faults(o: &mut String, i: &InstanceDiagnosis, spec: &Spec, width: usize) {
    let t = &i.totals;
    let r = &i.rates;
    o.push_str("\n  Page faults\n");
    // Left out by --events: the sampled rows were not measured (the kernel's counters were).
    let sampled = |per_s: f64, n: u64| {
        if spec.opened("faults") {
            (rate(per_s), n.to_string())
        } else {
            ("-".to_string(), "not measured".to_string())
        }
    };
    let (seg_rate, seg_n) = sampled(r.segment_faults_per_s, t.segment_faults);
    let (other_rate, other_n) = sampled(r.other_faults_per_s, t.other_faults);
    o.push_str(&columns(
        &["", "per s", "total"],
        &[Align::Left, Align::Right, Align::Right],
        &[
            vec!["in the shared segment".into(), seg_rate, seg_n],
            vec!["elsewhere".into(), other_rate, other_n],
            vec![
                "minor faults, kernel counters".into(),
                rate(r.minflt_per_s),
                t.minflt.to_string(),
            ],
        ],
        4,
        width,
    ));
    o.push_str(&format!(
        "    {}\n",
        wrap(
            &format!(
                "{} fault samples (sampled faults x period); kernel counters from /proc/PID/stat",
                t.fault_samples
            ),
            width,
            4,
            4
        )
    ));
}

/// Scheduling: involuntary switches, run-queue wait, switches while runnable and inside the fault path.
fn scheduling(o: &mut String, i: &InstanceDiagnosis, spec: &Spec, width: usize) {
    let t = &i.totals;
    let r = &i.rates;
    let window_s = spec.observed_s;
    let s = &t.switches;
    o.push_str("\n  Scheduling\n");
    o.push_str(&field(
        "involuntary",
        &format!(
            "{}/s switches (voluntary {}/s); run-queue wait {} ms/s; CPU {} ms/s",
            rate(r.nivcsw_per_s),
            rate(t.nvcsw as f64 / window_s.max(1e-9)),
            sig3(r.runqueue_wait_ms_per_s),
            sig3(t.cpu_ms / window_s.max(1e-9))
        ),
        width,
    ));
    o.push_str(&field(
        "runnable",
        &(format!(
            "{} switched out while runnable; {} of them with the page-fault path on the stack: {} preempted inside the kernel, {} at cond_resched, {} on the return to user space, {} otherwise; {} in-kernel preemptions in all",
            s.runnable,
            s.runnable_in_fault,
            s.in_fault_kernel_preemption,
            s.in_fault_voluntary,
            s.after_fault_return_to_user,
            s.in_fault_other,
            s.kernel_preemption
        ) + &switch_time(spec)),
        width,
    ));
}

/// The wait events of active client backends, sampled over --pg.
fn waits(o: &mut String, i: &InstanceDiagnosis, width: usize) {
    if let Some(w) = &i.waits {
        // Results written before `sightings` existed hold the sightings in `backends_seen`.
        let (seen, sightings) = match w.sightings {
            Some(n) => (format!("{} backends", w.backends_seen), n),
            None => (String::new(), w.backends_seen),
        };
        let on_client = w.waiting_on_client.unwrap_or(0);
        let of = sightings.saturating_sub(on_client);
        o.push_str(&format!(
            "\n  Wait events of active client backends ({} reads, {}{}{} sightings)\n",
            w.reads,
            seen,
            if seen.is_empty() { "" } else { ", " },
            sightings
        ));
        let rows: Vec<Vec<String>> = w
            .events
            .iter()
            .take(8)
            .map(|(e, n)| vec![pct(*n, of), e.clone()])
            .collect();
        if !rows.is_empty() {
            o.push_str(&columns(
                &["share", "event"],
                &[Align::Right, Align::Left],
                &rows,
                4,
                width,
            ));
        }
        if on_client > 0 {
            o.push_str(&format!(
                "    {}\n",
                wrap(
                    &format!(
                        "and {on_client} sightings waiting on their client (Client:*, left out above: the \
                         client's time, not the server's)"
                    ),
                    width,
                    4,
                    6
                )
            ));
        }
        if let (Some(e), Some(src)) = (w.evictions_per_s, &w.evictions_source) {
            o.push_str(&format!(
                "    {}\n",
                wrap(&format!("buffers {}/s ({src})", rate(e)), width, 4, 6)
            ));
        }
        if let Some(n) = &w.note {
            o.push_str(&format!("    {}\n", wrap(n, width, 4, 4)));
        }
    }
}

/// The figures by process type.
fn by_type(o: &mut String, i: &InstanceDiagnosis, width: usize) {
    if !i.by_type.is_empty() {
        o.push_str("\n  By process type\n");
        let rows: Vec<Vec<String>> = i
            .by_type
            .iter()
            .map(|b| {
                vec![
                    b.process_type.clone(),
                    b.processes.to_string(),
                    b.cpu.samples.to_string(),
                    pct(b.cpu.spinlock, b.cpu.samples),
                    b.segment_faults.to_string(),
                    b.switches.runnable_in_fault.to_string(),
                ]
            })
            .collect();
        o.push_str(&columns(
            &[
                "type",
                "procs",
                "samples",
                "spin",
                "seg faults",
                "in-fault sw",
            ],
            &[
                Align::Left,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Right,
            ],
            &rows,
            4,
            width,
        ));
        let by_stack: Vec<String> = i
            .by_type
            .iter()
            .filter_map(|b| Some(format!("{} {}", b.typed_by_stack?, b.process_type)))
            .collect();
        if !by_stack.is_empty() {
            o.push_str(&format!(
                "    typed by a sampled call stack (exited before their title was read): {}\n",
                by_stack.join(", ")
            ));
        }
    }
}

/// The verdict with its reasons and the audit's fix.
fn verdict(o: &mut String, i: &InstanceDiagnosis, st: Style, width: usize) {
    let v = &i.verdict;
    o.push('\n');
    // "can't tell" reads as a verdict of its own, not as what the symptom "is".
    let line = match v.symptom {
        Symptom::CantTell => format!(
            "{}: whether the lock-holder-preemption symptom is present",
            symptom(v.symptom, st)
        ),
        _ => format!(
            "the lock-holder-preemption symptom is {}",
            symptom(v.symptom, st)
        ),
    };
    o.push_str(&format!("  {} {line}\n", st.bold("Verdict:")));
    for reason in v.reasons.iter().chain(&v.checks) {
        o.push_str(&format!("    - {}\n", wrap(reason, width, 6, 6)));
    }
    if !v.fix.is_empty() {
        o.push_str(&format!("  {}\n", st.bold("Fix (from the audit):")));
        for l in &v.fix {
            o.push_str(&format!("    {}\n", wrap(l, width, 4, 6)));
        }
    }
    o.push('\n');
}

/// The perf events' scope in one line: `cgroup /system.slice/pg.service (why)`.
/// The executable in one line: its path, build, whether it is still the file at its path, its symbols
/// and frame pointers.
fn binary_line(b: &results::diagnose::Binary) -> String {
    let mut l = shown(&b.path);
    if let Some(id) = &b.build_id {
        l.push_str(&format!(", build ID {}", &id[..id.len().min(12)]));
    }
    if b.replaced_on_disk == Some(true) {
        l.push_str(
            ", REPLACED ON DISK since it started (an upgrade not yet followed by a restart: the \
             server runs the old build; names read from the mapped file)",
        );
    }
    if !b.symbols.is_empty() {
        l.push_str(&format!("; symbols: {}", b.symbols));
    }
    match b.frame_pointers {
        Some(true) => l.push_str("; keeps frame pointers"),
        Some(false) => l.push_str("; no frame pointers"),
        None => {}
    }
    if b.read_through.starts_with("unreadable") {
        l.push_str(&format!("; {}", shown(&b.read_through)));
    }
    l
}

/// Who waits on the spinlock: its samples by call chain, or why the callers are not named.
fn spin_callers(o: &mut String, i: &InstanceDiagnosis, width: usize) {
    let spin = i.totals.cpu.spinlock;
    if spin == 0 {
        return;
    }
    if i.spin_callers.is_empty() {
        if let Some(why) = &i.spin_callers_unavailable {
            o.push_str(&format!(
                "\n  {}\n",
                wrap(&format!("Spinlock callers: not named: {why}"), width, 2, 4)
            ));
        }
        return;
    }
    o.push_str(&format!("\n  Spinlock callers ({spin} samples)\n"));
    let rows: Vec<Vec<String>> = i
        .spin_callers
        .iter()
        .take(5)
        .map(|c| vec![format!("{:.1}%", c.pct), shown(&c.chain)])
        .collect();
    o.push_str(&columns(
        &["share", "leaf <- callers"],
        &[Align::Right, Align::Left],
        &rows,
        4,
        width,
    ));
}

pub(crate) fn scope_line(sc: &results::diagnose::EventScope) -> String {
    let mut s = sc.kind.name().to_string();
    if !sc.cgroups.is_empty() {
        s.push(' ');
        s.push_str(&sc.cgroups.join(", "));
    }
    format!("{s} ({})", sc.why)
}

/// How much of the window the switch counts are of, when not all of it (`--switch-duty`).
fn switch_time(spec: &Spec) -> String {
    match (spec.switch_duty_pct, spec.switch_on_s) {
        (Some(pct), Some(on_s)) if pct < 100 => format!(
            " (counted in the {on_s:.1} s the tracepoint was on, {pct}% of each second; x{:.1} for the window)",
            spec.observed_s / on_s.max(1e-9)
        ),
        _ => String::new(),
    }
}

/// How much of the window the on-CPU samples were on, when not all of it (`--cpu-duty`).
fn cpu_time(spec: &Spec) -> String {
    match (spec.cpu_duty_pct, spec.cpu_on_s) {
        (Some(pct), Some(on_s)) if pct < 100 => {
            format!(" for {on_s:.1} s ({pct}% of each second)")
        }
        _ => String::new(),
    }
}

/// The diagnosis as text.
pub fn render(r: &DiagnoseResult, st: Style, width: usize) -> String {
    let mut o = String::new();
    let k = &r.envelope.host.kernel;
    o.push_str(&st.bold("preemptlab diagnose"));
    o.push('\n');
    o.push('\n');
    let mut window = format!(
        "{:.1} s observed of {:.0} s; cpu-clock at {} Hz per CPU{}; {} minor faults sampled{}",
        r.spec.observed_s,
        r.spec.duration_s,
        r.spec.cpu_clock_hz,
        cpu_time(&r.spec),
        fault_sampling(&r.spec),
        fault_duty(&r.spec)
    );
    if let Some(e) = &r.spec.events {
        window.push_str(&format!("; only {} (--events)", e.join(", ")));
    }
    if let Some(off) = r.spec.events_off_s.filter(|s| *s > 0.0) {
        window.push_str(&format!(
            "; events off for {off:.1} s at --control's request (rates are of the time on)"
        ));
    }
    if r.envelope.interrupted {
        window.push_str("; INTERRUPTED: a partial result");
    }
    o.push_str(&field("window", &window, width));
    if let Some(sc) = &r.spec.scope {
        o.push_str(&field("events", &scope_line(sc), width));
    }
    o.push_str(&field(
        "host",
        &format!(
            "kernel {} on {} CPUs, preemption {}{}",
            k.release.value.as_deref().unwrap_or("?"),
            k.cpus.value.map(|c| c.to_string()).unwrap_or("?".into()),
            k.preemption.model.as_str(),
            k.preemption
                .decided_by
                .as_ref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        ),
        width,
    ));
    o.push('\n');
    for i in &r.instances {
        instance(&mut o, i, &r.spec, st, width);
    }
    if !r.unmeasured.is_empty() {
        o.push_str(&st.bold("Not measured"));
        o.push('\n');
        for u in &r.unmeasured {
            o.push_str(&format!(
                "  - {}\n",
                wrap(&format!("{}: {}", u.what, u.why), width, 4, 4)
            ));
        }
    }
    o
}

/// A few lines per instance: the verdict and its key counts (`check --pg` shows this).
pub fn summary(r: &DiagnoseResult, width: usize) -> String {
    let mut o = String::new();
    for i in &r.instances {
        let v = &i.verdict;
        let line = format!(
            "instance {} ({}): symptom {}; spinlock {:.1}% of {} client-backend samples (95% CI {:.1}..{:.1}%); segment on {} pages, {}/s faults in it; {} preempted inside faults",
            i.postmaster_pid,
            i.data_dir.as_deref().unwrap_or("?"),
            v.symptom.as_str(),
            v.spinlock_share.pct,
            v.spinlock_share.of,
            v.spinlock_share.lo_pct,
            v.spinlock_share.hi_pct,
            i.segment
                .as_ref()
                .map(|s| page(s.page_size_kib))
                .unwrap_or_else(|| "unknown".into()),
            rate(i.rates.segment_faults_per_s),
            i.totals.switches.in_fault_kernel_preemption
        );
        o.push_str(&format!("  {}\n", wrap(&line, width, 2, 4)));
    }
    for u in &r.unmeasured {
        o.push_str(&format!(
            "  {}\n",
            wrap(&format!("not measured: {}: {}", u.what, u.why), width, 2, 4)
        ));
    }
    o
}

/// "1 in 64", and how far the bound on samples raised it.
pub(crate) fn fault_sampling(s: &Spec) -> String {
    match (s.fault_period_max, s.fault_samples_max) {
        (Some(hi), Some(n)) if hi > s.fault_period => format!(
            "1 in {} to 1 in {hi} (at most ~{n} samples a second)",
            s.fault_period
        ),
        _ => format!("1 in {}", s.fault_period),
    }
}

/// "; the fault event on 1.5 s of 6.0 ..." when the bound on faults counted turned it on for part of
/// each second; else nothing.
pub(crate) fn fault_duty(s: &Spec) -> String {
    match (s.fault_duty_pct_min, s.fault_counts_max, s.fault_on_s) {
        (Some(pct), Some(n), Some(on)) => format!(
            "; the fault event on {on:.1} s of {:.1} (down to {pct}% of each second above ~{n} faults a \
             second per CPU; its counts scaled)",
            s.observed_s
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use results::diagnose::{EventScope, ScopeKind, Spec};

    #[test]
    fn switch_counts_of_part_of_the_window_say_so() {
        let mut spec = Spec {
            duration_s: 10.0,
            observed_s: 10.0,
            cpu_clock_hz: 199,
            fault_period: 16,
            fault_samples_max: None,
            fault_period_max: None,
            fault_counts_max: None,
            fault_duty_pct_min: None,
            fault_on_s: None,
            pids: Vec::new(),
            dsns: Vec::new(),
            wait_sample_interval_s: 0.2,
            sched_switch_filter: None,
            kernel_symbols: None,
            scope: None,
            events: None,
            switch_duty_pct: Some(20),
            switch_on_s: Some(2.5),
            cpu_duty_pct: Some(20),
            cpu_on_s: Some(2.04),
            events_off_s: None,
            cpu_samples_all: None,
            unparsed_records: None,
            window_start_monotonic_ns: None,
        };
        assert_eq!(super::cpu_time(&spec), " for 2.0 s (20% of each second)");
        assert_eq!(
            super::switch_time(&spec),
            " (counted in the 2.5 s the tracepoint was on, 20% of each second; x4.0 for the window)"
        );
        spec.switch_duty_pct = Some(100);
        assert_eq!(super::switch_time(&spec), "");
        // Files from before the duty existed: on all the time, nothing to say.
        spec.switch_duty_pct = None;
        spec.switch_on_s = None;
        assert_eq!(super::switch_time(&spec), "");
        spec.cpu_duty_pct = None;
        spec.cpu_on_s = None;
        assert_eq!(super::cpu_time(&spec), "");
        assert!(spec.opened("faults"));
        spec.events = Some(vec!["cpu".into()]);
        assert!(!spec.opened("faults") && spec.opened("cpu"));
        // The fault event on all the time: nothing to say; part-time: how long, down to what share.
        spec.fault_counts_max = Some(20_000);
        spec.fault_on_s = Some(10.0);
        assert_eq!(super::fault_duty(&spec), "");
        spec.fault_duty_pct_min = Some(10);
        spec.fault_on_s = Some(1.9);
        assert_eq!(
            super::fault_duty(&spec),
            "; the fault event on 1.9 s of 10.0 (down to 10% of each second above ~20000 faults a second \
             per CPU; its counts scaled)"
        );
    }

    #[test]
    fn the_scope_fits_one_line() {
        let cg = EventScope {
            kind: ScopeKind::Cgroup,
            cgroups: vec!["/system.slice/postgresql@16-main.service".into()],
            why: "asked for with --scope cgroup".into(),
        };
        assert_eq!(
            super::scope_line(&cg),
            "cgroup /system.slice/postgresql@16-main.service (asked for with --scope cgroup)"
        );
        let sys = EventScope {
            kind: ScopeKind::System,
            cgroups: Vec::new(),
            why: "asked for with --scope system".into(),
        };
        assert_eq!(
            super::scope_line(&sys),
            "system (asked for with --scope system)"
        );
    }
}
