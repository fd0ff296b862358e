//! The window itself: the wait-event samplers started, the events switched on and off by their duties and
//! by `--control`, the rings drained and /proc scanned each second; then the result put together.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use results::diagnose::{DiagnoseResult, EventScope, Spec, Unmeasured};

use crate::control::{Command, Control};
use crate::duty::Duty;
use crate::engine::{finish, Measured, Prepared};
use crate::perf::{self, Event, Ring};
use crate::symbolize::{Blaze, Symbolize};
use crate::track::State;
use crate::{faultrate, waits, Options};

/// Observes for the window (or until `stop`), then judges.
pub(crate) fn observe(
    p: Prepared,
    stop: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(f64),
) -> DiagnoseResult {
    let Prepared {
        opts,
        mut envelope,
        mut state,
        mut rings,
        filter,
        ok,
        scope,
        mut unmeasured,
        servers,
        clients,
        mut control,
    } = p;
    let opts = &opts;

    // Names through blazesym, which is made and used on this thread (bench pg --diagnose observes on one
    // of its own): the kernel's table and the postmasters' mappings read before the window opens (its
    // clocks start below).
    let mut sym = Blaze::new();
    for i in &state.insts {
        sym.hold(i.pm);
    }

    let samplers = Samplers::start(&servers, clients, &state, opts.wait_interval);
    let mut ring_set = Rings {
        rings: &mut rings,
        state: &mut state,
        sym: &mut sym,
        events: Vec::new(),
    };
    let w = watch(
        opts,
        &mut ring_set,
        ok,
        control.as_mut(),
        samplers.t0,
        (stop, progress),
    );
    drop(rings);
    let mut waits_of = samplers.finish(&mut state, w.observed_s);

    for (_, p) in std::mem::take(&mut state.procs) {
        let inst = p.inst;
        state.insts[inst].fold(p);
    }
    for i in state.insts.iter().filter(|i| !i.outside.is_empty()) {
        let pids: Vec<String> = i.outside.iter().map(u32::to_string).collect();
        unmeasured.push(Unmeasured {
            what: format!(
                "samples, faults and switches of postmaster {}'s processes {}",
                i.pm,
                pids.join(", ")
            ),
            why: format!(
                "they ran outside the watched cgroup {} (moved away): the cgroup events did not see them, \
                 their /proc counters are counted; rerun with --scope system",
                i.cgroup.as_deref().unwrap_or("?")
            ),
        });
    }
    unmeasured.extend(sym.unmeasured());
    envelope.interrupted = w.interrupted;
    let spec = spec(opts, &w, ok, &state, (filter, scope, sym.kernel_source()));
    let (switch_frac, fault_frac) = w.fractions(ok, opts.control.is_some());
    let (lost, observed_s) = (state.lost, w.observed_s);
    let instances = state
        .insts
        .into_iter()
        .enumerate()
        .map(|(k, inst)| {
            let waits = waits_of.remove(&k);
            finish(inst, waits, observed_s, lost, ok, (switch_frac, fault_frac))
        })
        .collect();
    DiagnoseResult {
        envelope,
        spec,
        unmeasured,
        instances,
    }
}

/// The rings and where what they hold goes.
struct Rings<'a> {
    rings: &'a mut Vec<Ring>,
    state: &'a mut State,
    sym: &'a mut Blaze,
    events: Vec<Event>,
}

impl Rings<'_> {
    /// Reads every ring into the state, each fault sample weighing `scale` times its period (10 / the
    /// slots the fault event is on in); returns the faults the samples stood for at their periods alone,
    /// every process's.
    fn drain(&mut self, scale: u32) -> u64 {
        for r in self.rings.iter_mut() {
            r.drain(&mut self.events);
        }
        // Forks first, so a new backend's samples drained in the same pass find it.
        self.events
            .sort_by_key(|e| !matches!(e, Event::Fork { .. }));
        let mut faults = 0;
        for mut e in self.events.drain(..) {
            if let Event::Fault { weight, .. } = &mut e {
                faults += *weight;
                *weight *= u64::from(scale);
            }
            self.state.event(e, self.sym);
        }
        self.state.title_untitled();
        faults
    }

    /// Turns the rings of `kind` on or off.
    fn switch(&mut self, kind: perf::Kind, on: bool) {
        for r in self.rings.iter_mut().filter(|r| r.kind == kind) {
            let _ = if on { r.enable() } else { r.disable() };
        }
    }
}

/// One thread per `--pg` server matched to an observed instance, sampling its wait events, and what they
/// sent.
struct Samplers {
    t0: Instant,
    stop: Arc<AtomicBool>,
    rx: mpsc::Receiver<(usize, waits::Read)>,
    threads: Vec<Sampler>,
}

/// A sampler's threads: the instance, the server's DSN, the sampler and its forwarder.
type Sampler = (
    usize,
    String,
    std::thread::JoinHandle<waits::Ended>,
    std::thread::JoinHandle<()>,
);

impl Samplers {
    fn start(
        servers: &[results::host::pgquery::ServerInfo],
        clients: Vec<postgres::Client>,
        state: &State,
        interval: Duration,
    ) -> Samplers {
        let t0 = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
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
            let (stop, tx) = (stop.clone(), tx.clone());
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
        Samplers {
            t0,
            stop,
            rx,
            threads,
        }
    }

    /// Stops the samplers; their counts go into each instance's seconds, and each sampled instance's
    /// wait events, judged over the window, are returned.
    fn finish(
        self,
        state: &mut State,
        observed_s: f64,
    ) -> HashMap<usize, results::diagnose::Waits> {
        self.stop.store(true, Ordering::Relaxed);
        let mut ended: HashMap<usize, (String, waits::Ended)> = HashMap::new();
        for (k, dsn, h, fwd) in self.threads {
            let e = h.join().unwrap_or_default();
            let _ = fwd.join();
            ended.insert(k, (dsn, e));
        }
        let mut totals: HashMap<usize, BTreeMap<String, u64>> = HashMap::new();
        for (k, r) in self.rx.try_iter() {
            let idx = (r.t_s as usize).min(state.insts[k].series.len().saturating_sub(1));
            for (e, n) in r.events {
                *state.insts[k]
                    .second(idx)
                    .waits
                    .entry(e.clone())
                    .or_insert(0) += n;
                *totals.entry(k).or_default().entry(e).or_insert(0) += n;
            }
        }
        ended
            .into_iter()
            .map(|(k, (dsn, e))| {
                let counts = totals.remove(&k).unwrap_or_default();
                (k, waits::finish(dsn, e, counts, observed_s))
            })
            .collect()
    }
}

/// The window as it went: the duties' on-time, `--control`'s off-time, the fault event's adaptation.
struct Watched {
    switch: Duty,
    cpu: Duty,
    fault: Duty,
    off_ns: u64,
    interrupted: bool,
    adapt: faultrate::Adapt,
    observed_s: f64,
}

impl Watched {
    /// The shares of the window the switch counts and the fault counts are of. The fault counts stand
    /// for every fault of the time not turned off by `--control` (each sample weighs 10 / slots): only
    /// that time divides their rates.
    fn fractions(&self, ok: Measured, control: bool) -> (f64, f64) {
        let observed_s = self.observed_s;
        let switch = if ok.switches && observed_s > 0.0 {
            (self.switch.on_s() / observed_s).clamp(1e-6, 1.0)
        } else {
            1.0
        };
        let fault = match (ok.faults && observed_s > 0.0, control) {
            (true, true) => (1.0 - self.off_ns as f64 / 1e9 / observed_s).clamp(1e-6, 1.0),
            _ => 1.0,
        };
        (switch, fault)
    }
}

/// `--control`'s state: events off since (ns), and off in all.
#[derive(Default)]
struct Off {
    since: Option<u64>,
    ns: u64,
}

impl Off {
    /// Applies the commands read; true when one was `stop`.
    fn apply(&mut self, commands: &[Result<Command, String>]) -> bool {
        let mut stopped = false;
        for c in commands {
            match c {
                Ok(Command::Disable) => {
                    self.since.get_or_insert(perf::monotonic_ns());
                }
                Ok(Command::Enable) => {
                    if let Some(since) = self.since.take() {
                        self.ns += perf::monotonic_ns().saturating_sub(since);
                    }
                }
                Ok(Command::Stop) => stopped = true,
                Err(_) => {}
            }
        }
        stopped
    }
}

/// The events' duties: switches and cpu-clock on for their share of each second, seeded alike so that
/// equal shares get the same slots (unequal shares draw different amounts each second and part after the
/// first); faults on all the time but for `--control`'s `disable` (their on-time scales the fault rates).
/// The rings of a kind whose duty starts off stay off; the others are enabled now.
fn start_duties(
    opts: &Options,
    ok: Measured,
    rings: &mut Rings<'_>,
) -> [(perf::Kind, bool, Duty); 3] {
    let t0_ns = rings.state.t0_ns;
    let mut duties = [
        (
            perf::Kind::Switch,
            ok.switches,
            Duty::new(opts.switch_duty_pct, t0_ns),
        ),
        (perf::Kind::Cpu, ok.cpu, Duty::new(opts.cpu_duty_pct, t0_ns)),
        (perf::Kind::Fault, ok.faults, Duty::new(100, t0_ns)),
    ];
    let now = perf::monotonic_ns();
    let mut held_off = Vec::new();
    for (kind, open, d) in duties.iter_mut() {
        let on = *open && d.want(0);
        d.turned(on, now);
        if !on {
            held_off.push(*kind);
        }
    }
    for r in rings
        .rings
        .iter_mut()
        .filter(|r| !held_off.contains(&r.kind))
    {
        let _ = r.enable();
    }
    duties
}

/// At a second's end: the fault rate of the time the fault event was on picks its period and slots for
/// the next (the rings were drained just now, so what they hold from here on is at the new ones).
fn adapt_faults(
    opts: &Options,
    rings: &mut Rings<'_>,
    fault: &mut Duty,
    adapt: &mut faultrate::Adapt,
    max_counts: f64,
) {
    let on = fault.on_ns(perf::monotonic_ns());
    let Some(now) = rings
        .rings
        .iter()
        .find(|r| r.kind == perf::Kind::Fault)
        .map(|r| (r.period(), fault.slots()))
    else {
        return;
    };
    let limits = (opts.fault_period, opts.fault_samples_max, max_counts);
    if let Some((p, slots)) = faultrate::choose(adapt, on, now, limits) {
        if p != now.0 {
            for r in rings
                .rings
                .iter_mut()
                .filter(|r| r.kind == perf::Kind::Fault)
            {
                let _ = r.set_period(p);
            }
        }
        if slots != now.1 {
            fault.set_slots(slots);
        }
    }
}

/// The loop of the window: woken by the rings, at each duty slot's edge and each second; drains, adapts,
/// switches events, scans /proc each second; ends at the window's end, when every instance has exited,
/// on `--control`'s `stop` or on `stop`.
fn watch(
    opts: &Options,
    rings: &mut Rings<'_>,
    ok: Measured,
    mut control: Option<&mut Control>,
    t0: Instant,
    (stop, progress): (&dyn Fn() -> bool, &mut dyn FnMut(f64)),
) -> Watched {
    rings.state.t0_ns = perf::monotonic_ns();
    rings.state.baseline();
    let mut duties = start_duties(opts, ok, rings);
    let mut off = Off::default();
    progress(0.0);
    let mut adapt = faultrate::Adapt {
        faults_seen: 0,
        on_at_check: 0,
        period_max: opts.fault_period,
        slots_min: crate::duty::SLOTS,
    };
    // Faults counted a second on all the CPUs (a fault ring each) before the event goes part-time.
    let cpus = rings
        .rings
        .iter()
        .filter(|r| r.kind == perf::Kind::Fault)
        .count();
    let max_counts = opts.fault_counts_max as f64 * cpus as f64;
    let mut next_second = 1usize;
    let (mut interrupted, mut stopped) = (false, false);
    loop {
        let elapsed = t0.elapsed();
        let boundary = Duration::from_secs(next_second as u64);
        if elapsed < boundary {
            let mut wait = (boundary - elapsed).min(Duration::from_millis(100));
            // Woken at each slot's edge while an event is on for part of each second.
            if duties.iter().any(|(_, open, d)| *open && !d.always()) {
                let slot = Duty::to_next_slot_ns(elapsed.as_nanos() as u64);
                wait = wait.min(Duration::from_nanos(slot));
            }
            perf::poll(rings.rings, control.as_deref().and_then(Control::fd), wait);
        }
        let commands = control
            .as_deref_mut()
            .map(Control::read)
            .unwrap_or_default();
        stopped |= off.apply(&commands);
        adapt.faults_seen += rings.drain(crate::duty::SLOTS / duties[2].2.slots());
        let at_boundary = !stopped && t0.elapsed() >= boundary;
        if at_boundary {
            adapt_faults(opts, rings, &mut duties[2].2, &mut adapt, max_counts);
        }
        for (kind, _, duty) in duties.iter_mut().filter(|(_, open, _)| *open) {
            let want = off.since.is_none() && duty.want(t0.elapsed().as_nanos() as u64);
            if want != duty.is_on() {
                rings.switch(*kind, want);
                duty.turned(want, perf::monotonic_ns());
            }
        }
        if let Some(ctl) = control.as_deref_mut() {
            // Answered once the rings are as asked.
            for c in &commands {
                ctl.answer(c.as_ref().map(|_| ()).map_err(String::as_str));
            }
        }
        if stopped {
            break;
        }
        if at_boundary {
            let t_s = t0.elapsed().as_secs_f64();
            rings.state.scan(next_second - 1, t_s);
            progress(t_s);
            next_second += 1;
            let all_exited = rings.state.insts.iter().all(|i| i.exited_at_s.is_some());
            if all_exited || t0.elapsed() >= opts.duration {
                break;
            }
        }
        if stop() {
            interrupted = true;
            break;
        }
    }
    for r in rings.rings.iter_mut() {
        let _ = r.disable();
    }
    let now = perf::monotonic_ns();
    for (_, _, d) in duties.iter_mut() {
        d.turned(false, now);
    }
    if let Some(since) = off.since {
        off.ns += now.saturating_sub(since);
    }
    let [(_, _, switch), (_, _, cpu), (_, _, fault)] = duties;
    rings.drain(crate::duty::SLOTS / fault.slots());
    let observed_s = t0.elapsed().as_secs_f64();
    if interrupted || stopped {
        rings.state.scan(next_second - 1, observed_s);
    }
    Watched {
        switch,
        cpu,
        fault,
        off_ns: off.ns,
        interrupted,
        adapt,
        observed_s,
    }
}

/// The result's spec: what was asked and what the window did.
fn spec(
    opts: &Options,
    w: &Watched,
    ok: Measured,
    state: &State,
    (filter, scope, kernel_source): (Option<&'static str>, EventScope, &str),
) -> Spec {
    let adapt = &w.adapt;
    Spec {
        duration_s: opts.duration.as_secs_f64(),
        observed_s: w.observed_s,
        cpu_clock_hz: opts.cpu_clock_hz,
        fault_period: opts.fault_period,
        fault_samples_max: (ok.faults && opts.fault_samples_max > 0)
            .then_some(opts.fault_samples_max),
        fault_period_max: (adapt.period_max > opts.fault_period).then_some(adapt.period_max),
        fault_counts_max: (ok.faults && opts.fault_counts_max > 0).then_some(opts.fault_counts_max),
        fault_duty_pct_min: (adapt.slots_min < crate::duty::SLOTS)
            .then_some(adapt.slots_min * 100 / crate::duty::SLOTS),
        fault_on_s: ok.faults.then(|| w.fault.on_s()),
        pids: opts.pids.clone(),
        dsns: opts
            .dsns
            .iter()
            .map(|d| hostfacts::pgquery::redact(d))
            .collect(),
        wait_sample_interval_s: opts.wait_interval.as_secs_f64(),
        sched_switch_filter: filter.map(str::to_string),
        kernel_symbols: Some(kernel_source.to_string()),
        scope: Some(scope),
        switch_duty_pct: ok.switches.then_some(opts.switch_duty_pct),
        switch_on_s: ok.switches.then(|| w.switch.on_s()),
        cpu_duty_pct: ok.cpu.then_some(opts.cpu_duty_pct),
        cpu_on_s: ok.cpu.then(|| w.cpu.on_s()),
        events_off_s: opts.control.is_some().then(|| w.off_ns as f64 / 1e9),
        events: (opts.events != crate::EventSet::ALL)
            .then(|| opts.events.names().iter().map(|n| n.to_string()).collect()),
        cpu_samples_all: ok.cpu.then_some(state.cpu_samples_all),
        unparsed_records: (state.unparsed > 0).then_some(state.unparsed),
        window_start_monotonic_ns: Some(state.t0_ns),
    }
}
