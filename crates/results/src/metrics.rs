//! The metric catalogue: every metric the benches and the sim record, with its unit, which way is
//! better, its centre and a typed accessor over one repetition. `compare`, `report` and the tables use
//! it; renaming a field breaks the accessor at compile time instead of silently dropping a column.

use serde::Serialize;
use stats::compare::Centre;

use crate::host::HostFacts;
use crate::vm::VmBlock;
use crate::{diagnose, latency, lock, net, pg};

/// Which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// Higher is better (throughput, fairness).
    Higher,
    /// Lower is better (latency, cost).
    Lower,
}

/// How a metric's values read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A rate, shown with a k/M suffix.
    Rate,
    /// Nanoseconds, shown in ns/us/ms.
    Ns,
    /// A plain number, three significant digits.
    Plain,
}

/// One repetition of any kind, borrowed.
#[derive(Debug, Clone, Copy)]
pub enum RepRef<'a> {
    /// `bench lock`.
    Lock(&'a lock::Rep),
    /// `bench pg`.
    Pg(&'a pg::Rep),
    /// `bench latency`.
    Latency(&'a latency::Rep),
    /// `bench net`.
    Net(&'a net::Rep),
    /// `sim`.
    Sim(&'a crate::model::Outcome),
    /// One second of a diagnosis (`compare` sets a diagnosis before a fix against one after, second by
    /// second).
    Diagnose(&'a diagnose::Second),
}

/// A metric.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Display name.
    pub name: &'static str,
    /// Unit for display.
    pub unit: Unit,
    /// Direction.
    pub better: Better,
    /// Centre over repetitions (harmonic for rates, arithmetic for times).
    pub centre: Centre,
    /// Its value in one repetition, where that kind records it.
    pub get: fn(RepRef<'_>) -> Option<f64>,
    /// Shown and judged only when asked for by name (`compare --metrics`): a figure of the whole machine,
    /// which other load moves and whose direction is not better or worse in itself.
    pub on_request: bool,
}

impl Metric {
    /// The metric named `name`.
    pub fn named(name: &str) -> Option<&'static Metric> {
        METRICS.iter().find(|m| m.name == name)
    }
}

const fn metric(
    name: &'static str,
    unit: Unit,
    better: Better,
    centre: Centre,
    get: fn(RepRef<'_>) -> Option<f64>,
) -> Metric {
    Metric {
        name,
        unit,
        better,
        centre,
        get,
        on_request: false,
    }
}

/// [`metric`], shown only when asked for by name.
const fn on_request(m: Metric) -> Metric {
    Metric {
        on_request: true,
        ..m
    }
}

use Better::{Higher, Lower};
use Centre::{Arithmetic, Harmonic};
use RepRef as R;

/// Every metric, in display order (a cell shows the ones its repetitions have).
pub const METRICS: [Metric; 23] = [
    metric("ops/s", Unit::Rate, Higher, Harmonic, |r| match r {
        R::Lock(r) => Some(r.ops_per_s),
        R::Sim(o) => Some(o.ops_per_s),
        _ => None,
    }),
    metric("tps", Unit::Rate, Higher, Harmonic, |r| match r {
        R::Pg(r) => Some(r.tps),
        R::Sim(o) => o.txn_per_s,
        _ => None,
    }),
    metric("acquire p99", Unit::Ns, Lower, Arithmetic, |r| match r {
        R::Lock(r) => Some(r.acquire_ns.p99 as f64),
        R::Sim(o) => Some(o.acquire_ns.p99 as f64),
        _ => None,
    }),
    metric("hold p99", Unit::Ns, Lower, Arithmetic, |r| match r {
        R::Lock(r) => Some(r.hold_ns.p99 as f64),
        R::Sim(o) => Some(o.hold_ns.p99 as f64),
        _ => None,
    }),
    metric("stalls/Mop", Unit::Plain, Lower, Arithmetic, |r| match r {
        R::Lock(r) => Some(r.stalled_per_mop),
        R::Sim(o) => Some(o.stalled_per_mop),
        _ => None,
    }),
    metric("faults/op", Unit::Plain, Lower, Arithmetic, |r| match r {
        R::Lock(r) => Some(r.minflt_per_op),
        R::Sim(o) => Some(o.minflt_per_op),
        _ => None,
    }),
    on_request(metric(
        "resched IPIs/op",
        Unit::Plain,
        Lower,
        Arithmetic,
        |r| match r {
            R::Lock(r) => r.resched_ipis_per_op,
            R::Pg(r) => r.resched_ipis_per_tx,
            _ => None,
        },
    )),
    metric("CPU/op", Unit::Ns, Lower, Arithmetic, |r| match r {
        R::Lock(r) => Some(r.cpu_ns_per_op),
        R::Sim(o) => Some(o.cpu_ns_per_op),
        _ => None,
    }),
    metric("Jain", Unit::Plain, Higher, Arithmetic, |r| match r {
        R::Lock(r) => Some(r.jain),
        R::Sim(o) => Some(o.jain),
        _ => None,
    }),
    metric("latency p99", Unit::Plain, Lower, Arithmetic, |r| match r {
        R::Pg(r) => r.latency_ms.p99,
        _ => None,
    }),
    metric(
        "page tables kB",
        Unit::Plain,
        Lower,
        Arithmetic,
        |r| match r {
            R::Pg(r) => Some(r.page_tables_kib as f64),
            _ => None,
        },
    ),
    metric("faults/tx", Unit::Plain, Lower, Arithmetic, |r| match r {
        R::Pg(r) => Some(r.minflt_per_tx),
        _ => None,
    }),
    metric(
        "wakeup p50 us",
        Unit::Plain,
        Lower,
        Arithmetic,
        |r| match r {
            R::Latency(r) => Some(r.latency_us.p50),
            _ => None,
        },
    ),
    metric(
        "wakeup p99 us",
        Unit::Plain,
        Lower,
        Arithmetic,
        |r| match r {
            R::Latency(r) => Some(r.latency_us.p99),
            _ => None,
        },
    ),
    metric("sender B/s", Unit::Rate, Higher, Harmonic, |r| match r {
        R::Net(r) => Some(r.sender_bytes_per_s),
        _ => None,
    }),
    metric("msgs/s", Unit::Rate, Higher, Harmonic, |r| match r {
        R::Net(r) => Some(r.msgs_per_s),
        _ => None,
    }),
    metric("RTT p99 us", Unit::Plain, Lower, Arithmetic, |r| match r {
        R::Net(r) => r.rtt_us.as_ref().map(|p| p.p99),
        _ => None,
    }),
    metric("spinlock %", Unit::Plain, Lower, Arithmetic, |r| match r {
        R::Diagnose(s) => share(s.cpu.spinlock, s.cpu.samples),
        _ => None,
    }),
    metric(
        "page fault %",
        Unit::Plain,
        Lower,
        Arithmetic,
        |r| match r {
            R::Diagnose(s) => share(s.cpu.page_fault, s.cpu.samples),
            _ => None,
        },
    ),
    metric(
        "segment faults/s",
        Unit::Rate,
        Lower,
        Arithmetic,
        |r| match r {
            R::Diagnose(s) => Some(s.segment_faults as f64),
            _ => None,
        },
    ),
    metric("minflt/s", Unit::Rate, Lower, Arithmetic, |r| match r {
        R::Diagnose(s) => Some(s.minflt as f64),
        _ => None,
    }),
    metric("nivcsw/s", Unit::Rate, Lower, Arithmetic, |r| match r {
        R::Diagnose(s) => Some(s.nivcsw as f64),
        _ => None,
    }),
    metric(
        "in-fault switches/s",
        Unit::Rate,
        Lower,
        Arithmetic,
        |r| match r {
            R::Diagnose(s) => Some(s.switches.runnable_in_fault as f64),
            _ => None,
        },
    ),
];

/// A share in %, None for a second without samples.
fn share(part: u64, of: u64) -> Option<f64> {
    (of > 0).then(|| part as f64 / of as f64 * 100.0)
}

/// A host fact worth showing when two results differ in it.
#[derive(Debug, Clone, Copy)]
pub struct HostFact {
    /// Label.
    pub label: &'static str,
    /// Its value as text (`null` when it could not be read).
    pub get: fn(&HostFacts) -> String,
}

fn show<T: ToString>(v: &Option<T>) -> String {
    v.as_ref()
        .map(|v| v.to_string())
        .unwrap_or_else(|| "null".into())
}

const fn fact(label: &'static str, get: fn(&HostFacts) -> String) -> HostFact {
    HostFact { label, get }
}

/// The host facts `compare` sets side by side, and `compare --by` requires equal.
pub const HOST_FACTS: [HostFact; 13] = [
    fact("host", |h| show(&h.hostname.value)),
    fact("kernel", |h| show(&h.kernel.release.value)),
    fact("uname -v", |h| show(&h.kernel.version.value)),
    fact("arch", |h| show(&h.kernel.arch.value)),
    fact("CPUs", |h| show(&h.kernel.cpus.value)),
    fact("HZ", |h| show(&h.kernel.hz.value)),
    fact("preemption", |h| h.kernel.preemption.model.to_string()),
    fact("preemption source", |h| {
        show(&h.kernel.preemption.decided_by)
    }),
    fact("rseq slice ext", |h| {
        show(&h.kernel.rseq_slice_extension.value)
    }),
    fact("RAM kB", |h| show(&h.memory.total_kib.value)),
    fact("THP enabled", |h| show(&h.memory.thp_enabled.value)),
    fact("THP shmem", |h| show(&h.memory.thp_shmem_enabled.value)),
    fact("THP defrag", |h| show(&h.memory.thp_defrag.value)),
];

/// A fact of the `vm` block (how a guest's result was measured: the machine and emulator beneath it) worth
/// showing when two results differ in it. A result measured outside a VM has none of them (`-`).
#[derive(Debug, Clone, Copy)]
pub struct VmFact {
    /// Label.
    pub label: &'static str,
    /// Its value as text (`null` when not recorded).
    pub get: fn(&VmBlock) -> String,
}

const fn vm_fact(label: &'static str, get: fn(&VmBlock) -> String) -> VmFact {
    VmFact { label, get }
}

/// The `vm` block's facts `compare` sets side by side, and `compare --by` requires equal: a guest's figures
/// depend on the host and emulator under it as much as on the guest (TCG guests measured four days apart, on
/// two builds of the host's kernel, differed by 4-97% in their costs), and on the guest's clock (the HPET runs
/// every cell at about half the TSC's speed under TCG). The clocksource reads `tsc` when it stayed the TSC,
/// `tsc->hpet` when it changed during the command, `null` in results written before it was recorded.
pub const VM_FACTS: [VmFact; 6] = [
    vm_fact("VM accelerator", |v| v.accelerator.clone()),
    vm_fact("VM host kernel", |v| v.host_kernel.clone()),
    vm_fact("VM QEMU", |v| show(&v.qemu_version)),
    vm_fact("VM vCPUs", |v| v.vcpus.to_string()),
    vm_fact("VM memory MiB", |v| v.memory_mib.to_string()),
    vm_fact("VM guest clocksource", |v| {
        match (&v.guest_clocksource_before, &v.guest_clocksource_after) {
            (Some(b), Some(a)) if a == b => b.clone(),
            (Some(b), Some(a)) => format!("{b}->{a}"),
            (Some(b), None) => format!("{b}->null"),
            (None, Some(a)) => format!("null->{a}"),
            (None, None) => "null".into(),
        }
    }),
];

/// The hugetlb pools as `2048kB:0 1048576kB:0` (`-` when unreadable).
pub fn pools(h: &HostFacts) -> String {
    h.memory
        .pools
        .value
        .as_ref()
        .map(|ps| {
            ps.iter()
                .map(|p| format!("{}kB:{}", p.page_size_kib, p.total))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| "-".into())
}
