//! The perf events, opened system-wide on every online CPU (pid = -1, cpu = N; perf_event_open(2)) or
//! for one cgroup on every online CPU (see [`crate::cgroup`]), and their records turned into this crate's
//! [`Event`]s.
//!
//! System-wide rather than per process: a backend that a connection starts and ends between two scans of
//! /proc is sampled all the same, and the number of file descriptors grows with the CPUs, not with the
//! backends. The instance's processes are picked out in user space (fork records name the parent).
//!
//! Three events per CPU (those `--events` keeps), each with its own ring buffer:
//! - `cpu-clock` at a frequency: IP, TID, time, the kernel call chain and the user chain (whose leaf is the
//!   user instruction even when the sample hit in the kernel; the frames above it are callers only in code
//!   built with frame pointers); with `task` on, fork and exit records too.
//! - `page-faults-min` (minor faults, the ones /proc/PID/stat's minflt counts) every `fault_period`th
//!   fault: TID, time and the faulting data address (PERF_SAMPLE_ADDR). The period can be changed while
//!   the event runs ([`Ring::set_period`]); each sample carries the period it was taken at.
//! - the `sched:sched_switch` tracepoint: TID, time, the raw record and the kernel call chain, filtered in
//!   the kernel to PostgreSQL's processes (prev_comm) switched out while runnable.
//!
//! Without cpu-clock, or with cpu-clock on for only part of each second (`--cpu-duty`), a `dummy` event per
//! CPU, always on, carries the fork and exit records.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::time::Duration;

use perf_event::events::{Software, Tracepoint};
use perf_event::{Builder, Clock, SampleFlag, Sampler};
use perf_event_open_sys::ioctls;

use crate::tracefs::SchedSwitch;

/// `PERF_CONTEXT_KERNEL`: the kernel part of a call chain follows.
const CONTEXT_KERNEL: u64 = -128i64 as u64;
/// `PERF_CONTEXT_USER`: the user part follows.
const CONTEXT_USER: u64 = -512i64 as u64;
/// Any marker at or above this (`PERF_CONTEXT_MAX` = -4095) is a context marker, not an address.
const CONTEXT_MAX: u64 = -4095i64 as u64;

/// A record of interest, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An on-CPU sample.
    Cpu {
        /// Process.
        pid: u32,
        /// CLOCK_MONOTONIC, ns.
        time_ns: u64,
        /// Kernel frames, leaf first (empty when the sample hit in user space).
        kernel: Vec<u64>,
        /// User frames, leaf first: the user instruction (or where user space entered the kernel), then
        /// what the kernel's frame-pointer walk found above it (callers in code built with frame pointers,
        /// noise in code built without). Empty for a task with no user space: a kernel thread, or a process
        /// exiting after its memory was released (`exit_mm`), whose samples still count.
        user: Vec<u64>,
    },
    /// A sampled minor fault.
    Fault {
        /// Process.
        pid: u32,
        /// CLOCK_MONOTONIC, ns.
        time_ns: u64,
        /// The faulting data address.
        addr: u64,
        /// The faults it stands for: the ring's period when it was read.
        weight: u64,
        /// User frames, leaf first: the faulting instruction, then the callers the frame-pointer walk
        /// found.
        user: Vec<u64>,
    },
    /// A `sched_switch` of a runnable task (the kernel filter let it through).
    Switch {
        /// The task switched out.
        prev_pid: u32,
        /// Its state as recorded.
        prev_state: i64,
        /// CLOCK_MONOTONIC, ns.
        time_ns: u64,
        /// Kernel frames, leaf first.
        kernel: Vec<u64>,
    },
    /// A fork: `pid` is the new process, `ppid` its parent.
    Fork {
        /// The child.
        pid: u32,
        /// The parent.
        ppid: u32,
        /// CLOCK_MONOTONIC, ns.
        time_ns: u64,
    },
    /// A thread or process exited.
    Exit {
        /// Process.
        pid: u32,
        /// Thread.
        tid: u32,
    },
    /// The kernel dropped this many records (the reader fell behind).
    Lost(u64),
    /// This many records could not be decoded (counted, so that nothing is dropped unseen).
    Unparsed(u64),
}

/// Splits a perf call chain into its kernel frames and its user frames, each leaf first.
pub fn split_chain(chain: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let mut kernel = Vec::new();
    let mut user = Vec::new();
    let mut ctx = 0u64;
    for &ip in chain {
        if ip >= CONTEXT_MAX {
            ctx = ip;
            continue;
        }
        match ctx {
            CONTEXT_KERNEL => kernel.push(ip),
            CONTEXT_USER => user.push(ip),
            _ => {}
        }
    }
    (kernel, user)
}

/// Which of the three events a ring carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// cpu-clock.
    Cpu,
    /// page-faults-min.
    Fault,
    /// sched_switch.
    Switch,
    /// Fork and exit records only (the `dummy` software event), when cpu-clock is left out.
    Task,
}

/// One event's ring on one CPU.
pub struct Ring {
    /// What it carries.
    pub kind: Kind,
    sampler: Sampler,
    switch: Option<SchedSwitch>,
    /// The sampling period of a fault ring (0 for the others).
    period: u64,
}

/// How to sample.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// cpu-clock frequency, Hz.
    pub cpu_clock_hz: u64,
    /// One fault sample per this many minor faults.
    pub fault_period: u64,
    /// Ring size per event and CPU, bytes (a power of two).
    pub ring_bytes: usize,
    /// Deepest call chain recorded.
    pub max_stack: u16,
}

/// The common settings. The reader is woken only when a ring is half full (it drains every 100 ms
/// anyway): waking it for every record cost the watched server dearly, an irq_work and a wake-up per
/// sample (with one per byte, 27% of a reconnecting pgbench's CPU sat in perf_swevent_event at one
/// fault sample in 4).
/// `cgroup`: watch only that cgroup2 directory's tasks (and its descendants'); `None`: every task.
fn base<'a>(
    builder: &mut Builder<'a>,
    cpu: usize,
    cgroup: Option<&'a File>,
    flags: SampleFlag,
    ring_bytes: usize,
) {
    match cgroup {
        Some(dir) => builder.observe_cgroup(dir),
        None => builder.any_pid(),
    };
    builder
        .one_cpu(cpu)
        .sample(flags)
        .clockid(Clock::MONOTONIC)
        .exclude_kernel(false)
        .exclude_hv(true)
        .wakeup_watermark(ring_bytes / 2);
}

/// Opens the cpu-clock ring of one CPU (of one cgroup's tasks on it with `cgroup`); with `task`, it also
/// carries the fork and exit records (only when it is on all the window: a ring turned off for part of each
/// second would miss the forks and exits of that part).
pub fn open_cpu(cpu: usize, cgroup: Option<&File>, c: &Config, task: bool) -> io::Result<Ring> {
    let mut b = Builder::new(Software::CPU_CLOCK);
    // The user part of the chain, not the user registers (PERF_SAMPLE_REGS_USER): a sample of a task
    // without user space carries only the registers' ABI word (PERF_SAMPLE_REGS_ABI_NONE, kernel/events/
    // core.c perf_output_sample), which perf-event-data 0.1.8 does not parse (it reads the mask's
    // registers regardless). That is every sample of a backend exiting after exit_mm() released its
    // memory: under `pgbench -C` a quarter of the server's samples (the 2026-11-29 comparison with
    // `perf record`, docs/notes/2026-11-29-diagnose-vs-perf.md). The chain's user leaf is the same user
    // instruction, and the frames above it name callers where the code keeps frame pointers.
    let flags = SampleFlag::TID | SampleFlag::TIME | SampleFlag::IP | SampleFlag::CALLCHAIN;
    base(&mut b, cpu, cgroup, flags, c.ring_bytes);
    b.sample_frequency(c.cpu_clock_hz)
        .sample_max_stack(c.max_stack)
        .task(task);
    Ok(Ring {
        kind: Kind::Cpu,
        sampler: b.build()?.sampled(c.ring_bytes)?,
        switch: None,
        period: 0,
    })
}

/// Opens a ring of one CPU that carries only fork and exit records (the `dummy` software event counts
/// nothing): how short-lived backends are followed when the on-CPU samples are left out (`--events`) or
/// on for only part of each second (`--cpu-duty`).
pub fn open_task(cpu: usize, cgroup: Option<&File>, c: &Config) -> io::Result<Ring> {
    let mut b = Builder::new(Software::DUMMY);
    base(
        &mut b,
        cpu,
        cgroup,
        SampleFlag::TID | SampleFlag::TIME,
        c.ring_bytes,
    );
    b.task(true);
    Ok(Ring {
        kind: Kind::Task,
        sampler: b.build()?.sampled(c.ring_bytes)?,
        switch: None,
        period: 0,
    })
}

/// Opens the minor-fault ring of one CPU. Each sample carries the faulting process's user call chain
/// (its kernel one left out): a backend that exits within milliseconds takes tens of faults on the
/// segment before its first on-CPU sample, if it gets one, and the chain's main function says what it was
/// where the build keeps frame pointers.
pub fn open_faults(cpu: usize, cgroup: Option<&File>, c: &Config) -> io::Result<Ring> {
    let mut b = Builder::new(Software::PAGE_FAULTS_MIN);
    base(
        &mut b,
        cpu,
        cgroup,
        SampleFlag::TID | SampleFlag::TIME | SampleFlag::ADDR | SampleFlag::CALLCHAIN,
        c.ring_bytes,
    );
    b.sample_period(c.fault_period.max(1))
        .exclude_callchain_kernel(true)
        .sample_max_stack(c.max_stack);
    Ok(Ring {
        kind: Kind::Fault,
        sampler: b.build()?.sampled(c.ring_bytes)?,
        switch: None,
        period: c.fault_period.max(1),
    })
}

/// The kernel filters tried on sched_switch, most selective first: PostgreSQL's processes switched out
/// while runnable (no TASK_REPORT state bit), then PostgreSQL's processes.
pub const SWITCH_FILTERS: [&str; 2] = [
    "(prev_comm == \"postgres\" || prev_comm == \"postmaster\") && !(prev_state & 255)",
    "prev_comm == \"postgres\" || prev_comm == \"postmaster\"",
];

/// Opens the sched_switch ring of one CPU with the first filter of [`SWITCH_FILTERS`] the kernel accepts
/// (none if it takes none); returns the filter used.
pub fn open_switch(
    cpu: usize,
    cgroup: Option<&File>,
    c: &Config,
    sw: SchedSwitch,
) -> io::Result<(Ring, Option<&'static str>)> {
    let mut b = Builder::new(Tracepoint::with_id(sw.id));
    base(
        &mut b,
        cpu,
        cgroup,
        SampleFlag::TID | SampleFlag::TIME | SampleFlag::RAW | SampleFlag::CALLCHAIN,
        c.ring_bytes,
    );
    b.sample_period(1)
        .exclude_callchain_user(true)
        .sample_max_stack(c.max_stack);
    let sampler = b.build()?.sampled(c.ring_bytes)?;
    let mut used = None;
    for f in SWITCH_FILTERS {
        let text = std::ffi::CString::new(f).expect("no NUL in the filters");
        // SAFETY: the fd is a perf event this process owns; the argument is a NUL-terminated string that
        // outlives the call (the kernel copies it).
        let rc = unsafe { ioctls::SET_FILTER(sampler.as_raw_fd(), text.as_ptr() as *mut _) };
        if rc == 0 {
            used = Some(f);
            break;
        }
    }
    Ok((
        Ring {
            kind: Kind::Switch,
            sampler,
            switch: Some(sw),
            period: 0,
        },
        used,
    ))
}

impl Ring {
    /// Starts counting.
    pub fn enable(&mut self) -> io::Result<()> {
        self.sampler.enable()
    }

    /// Stops counting (records already written stay readable).
    pub fn disable(&mut self) -> io::Result<()> {
        self.sampler.disable()
    }

    /// A fault ring's sampling period (0 for the other kinds).
    pub fn period(&self) -> u64 {
        self.period
    }

    /// Sets a fault ring's sampling period while it runs (`PERF_EVENT_IOC_PERIOD`). Records already in
    /// the ring are read at the new period's weight: drain it first. The kernel restarts the count
    /// towards the next sample, so each change loses less than one period of this CPU's faults.
    pub fn set_period(&mut self, period: u64) -> io::Result<()> {
        let p = period.max(1);
        // SAFETY: the fd is a perf event this process owns. PERF_EVENT_IOC_PERIOD takes the address of a
        // u64 (the kernel copies it: kernel/events/core.c _perf_ioctl), which the binding types as the
        // integer it passes; `p` outlives the call.
        let rc = unsafe { ioctls::PERIOD(self.sampler.as_raw_fd(), &p as *const u64 as u64) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        self.period = p;
        Ok(())
    }

    /// The fd, for poll.
    pub fn fd(&self) -> i32 {
        self.sampler.as_raw_fd()
    }

    /// Drains the ring into `out`; returns how many records were read.
    pub fn drain(&mut self, out: &mut Vec<Event>) -> usize {
        use perf_event::data::Record as R;
        let mut n = 0;
        let mut unparsed = 0;
        let (kind, switch, weight) = (self.kind, self.switch, self.period);
        while let Some(rec) = self.sampler.next_record() {
            n += 1;
            let Ok(parsed) = rec.parse_record() else {
                unparsed += 1;
                continue;
            };
            match parsed {
                R::Sample(s) => {
                    let (Some(pid), Some(time_ns)) = (s.pid(), s.time()) else {
                        continue;
                    };
                    match kind {
                        Kind::Cpu => {
                            let (kernel, mut user) = split_chain(s.callchain().unwrap_or(&[]));
                            if kernel.is_empty() && user.is_empty() {
                                user.extend(s.ip());
                            }
                            out.push(Event::Cpu {
                                pid,
                                time_ns,
                                kernel,
                                user,
                            });
                        }
                        Kind::Fault => {
                            if let Some(addr) = s.addr() {
                                let (_, user) = split_chain(s.callchain().unwrap_or(&[]));
                                out.push(Event::Fault {
                                    pid,
                                    time_ns,
                                    addr,
                                    weight,
                                    user,
                                });
                            }
                        }
                        Kind::Switch => {
                            let (Some(sw), Some(raw)) = (switch, s.raw()) else {
                                continue;
                            };
                            let (Some(prev_pid), Some(prev_state)) =
                                (sw.prev_pid.read(raw), sw.prev_state.read(raw))
                            else {
                                continue;
                            };
                            let (kernel, _) = split_chain(s.callchain().unwrap_or(&[]));
                            out.push(Event::Switch {
                                prev_pid: prev_pid as u32,
                                prev_state,
                                time_ns,
                                kernel,
                            });
                        }
                        Kind::Task => {}
                    }
                }
                R::Fork(f) => out.push(Event::Fork {
                    pid: f.pid,
                    ppid: f.ppid,
                    time_ns: f.time,
                }),
                R::Exit(e) => out.push(Event::Exit {
                    pid: e.pid,
                    tid: e.tid,
                }),
                R::Lost(l) => out.push(Event::Lost(l.lost)),
                _ => {}
            }
        }
        if unparsed > 0 {
            out.push(Event::Unparsed(unparsed));
        }
        n
    }
}

/// The CPUs online (`/sys/devices/system/cpu/online`, e.g. `0-3,6`).
pub fn online_cpus() -> Vec<usize> {
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

/// Waits up to `timeout` (at most 1 s) for a ring to fill past its watermark or a `--control` command.
pub fn poll(rings: &[Ring], control: Option<i32>, timeout: Duration) {
    let mut fds: Vec<libc::pollfd> = rings
        .iter()
        .map(Ring::fd)
        .chain(control)
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: fds is a valid array of pollfd of the given length for the duration of the call.
    unsafe {
        libc::poll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            // Rounded up: a timeout rounded down to 0 would spin until the slot or second boundary.
            timeout.as_micros().div_ceil(1000).min(1000) as i32,
        )
    };
}

/// CLOCK_MONOTONIC now, ns (the clock the rings stamp records with).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Why perf_event_open failed, in words an operator can act on.
pub fn explain(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "?".into());
            format!(
                "perf_event_open: {err} (system-wide events need root or CAP_PERFMON; kernel.perf_event_paranoid is {paranoid})"
            )
        }
        Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::EOPNOTSUPP) => {
            format!("perf_event_open: {err} (this kernel or VM does not offer the event)")
        }
        Some(libc::EMFILE) => {
            format!("perf_event_open: {err} (raise the open-file limit: ulimit -n)")
        }
        _ => format!("perf_event_open: {err}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_split() {
        let chain = [
            CONTEXT_KERNEL,
            0xffff_0001,
            0xffff_0002,
            CONTEXT_USER,
            0x401000,
            0x402000,
        ];
        assert_eq!(
            split_chain(&chain),
            (vec![0xffff_0001, 0xffff_0002], vec![0x401000, 0x402000])
        );
        assert_eq!(split_chain(&[CONTEXT_USER, 0x5]), (vec![], vec![0x5]));
        assert_eq!(split_chain(&[]), (vec![], vec![]));
    }
}
