//! A diagnosis in Prometheus text exposition format, for node_exporter's textfile collector (`preemptlab
//! diagnose --format prometheus --out DIR/preemptlab-diagnose.prom`), with the audit's conventions
//! (`prometheus.rs`): one gauge per measure and instance, labelled by `postmaster_pid` and `data_dir`;
//! ratios as 0..1, time in seconds. docs/metrics.md lists every metric.

use results::diagnose::{DiagnoseResult, InstanceDiagnosis, Symptom};

use crate::prometheus::{bool01, Labels, Out};

fn id(i: &InstanceDiagnosis) -> Labels {
    vec![
        ("postmaster_pid", i.postmaster_pid.to_string()),
        ("data_dir", i.data_dir.clone().unwrap_or_default()),
    ]
}

fn per_instance(
    o: &mut Out,
    r: &DiagnoseResult,
    name: &str,
    help: &str,
    value: impl Fn(&InstanceDiagnosis) -> Option<f64>,
) {
    let samples: Vec<(Labels, f64)> = r
        .instances
        .iter()
        .filter_map(|i| value(i).map(|v| (id(i), v)))
        .collect();
    o.gauge(name, help, &samples);
}

/// The head every file carries, success or not.
fn head(o: &mut Out, success: bool, unix_s: u64, version: &str) {
    o.gauge(
        "diagnose_success",
        "1 when the diagnosis ran to the end of its window; 0 when it failed or was cut short.",
        &[(vec![], bool01(success))],
    );
    o.gauge(
        "diagnose_timestamp_seconds",
        "When the diagnosis started, seconds since the Unix epoch.",
        &[(vec![], unix_s as f64)],
    );
    o.gauge(
        "diagnose_info",
        "Always 1; labels carry preemptlab's version.",
        &[(vec![("version", version.to_string())], 1.0)],
    );
}

/// The file a failed diagnosis leaves behind (success 0), so an alert fires instead of old numbers
/// being served.
pub fn render_failure(tool_version: &str, unix_s: u64) -> String {
    let mut o = Out::default();
    head(&mut o, false, unix_s, tool_version);
    o.text
}

/// Renders the diagnosis as Prometheus metrics.
pub fn render(r: &DiagnoseResult) -> String {
    let mut o = Out::default();
    head(
        &mut o,
        !r.partial(),
        r.envelope.started_unix_s,
        &r.envelope.tool_version,
    );
    o.gauge(
        "diagnose_window_seconds",
        "The window observed, seconds.",
        &[(vec![], r.spec.observed_s)],
    );
    o.gauge(
        "diagnose_symptom",
        "The lock-holder-preemption symptom per instance as a state set: 1 for the current one of present, not_present, cant_tell.",
        &r.instances
            .iter()
            .flat_map(|i| {
                [
                    ("present", Symptom::Present),
                    ("not_present", Symptom::NotPresent),
                    ("cant_tell", Symptom::CantTell),
                ]
                .map(|(name, s)| {
                    let mut l = id(i);
                    l.push(("state", name.to_string()));
                    (l, bool01(i.verdict.symptom == s))
                })
            })
            .collect::<Vec<_>>(),
    );
    per_instance(
        &mut o,
        r,
        "diagnose_spinlock_share_ratio",
        "Share of client backends' on-CPU samples in PostgreSQL's spinlock slow path (s_lock, perform_spin_delay), 0..1.",
        |i| Some(i.verdict.spinlock_share.pct / 100.0),
    );
    per_instance(
        &mut o,
        r,
        "diagnose_client_samples",
        "Client backends' on-CPU samples behind the shares.",
        |i| Some(i.verdict.spinlock_share.of as f64),
    );
    per_instance(
        &mut o,
        r,
        "diagnose_page_fault_share_ratio",
        "Share of client backends' on-CPU samples in the kernel's page-fault path, 0..1.",
        |i| Some(i.verdict.page_fault_share.pct / 100.0),
    );
    per_instance(
        &mut o,
        r,
        "diagnose_segment_faults_per_second",
        "Minor page faults per second in the instance's main shared memory segment (sampled and scaled).",
        |i| Some(i.rates.segment_faults_per_s),
    );
    per_instance(
        &mut o,
        r,
        "diagnose_minor_faults_per_second",
        "Minor page faults per second of the instance's processes, by the kernel's counters.",
        |i| Some(i.rates.minflt_per_s),
    );
    per_instance(
        &mut o,
        r,
        "diagnose_involuntary_switches_per_second",
        "Involuntary context switches per second of the instance's processes.",
        |i| Some(i.rates.nivcsw_per_s),
    );
    per_instance(
        &mut o,
        r,
        "diagnose_runqueue_wait_seconds_per_second",
        "Seconds per second the instance's processes waited runnable for a CPU (schedstat).",
        |i| Some(i.rates.runqueue_wait_ms_per_s / 1000.0),
    );
    per_instance(
        &mut o,
        r,
        "diagnose_preempted_in_fault_per_second",
        "Switches out while runnable with the page-fault path on the kernel stack, per second.",
        |i| Some(i.rates.preempted_in_fault_per_s),
    );
    per_instance(
        &mut o,
        r,
        "diagnose_segment_page_size_bytes",
        "The page size backing the main shared memory segment, bytes.",
        |i| i.segment.as_ref().map(|s| (s.page_size_kib * 1024) as f64),
    );
    o.text
}
