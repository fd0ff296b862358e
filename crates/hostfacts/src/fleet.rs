//! `preemptlab fleet`: many hosts' audits (`preemptlab audit --format json`) read back into one answer.
//!
//! The question is the fleet owner's: which hosts are exposed, what exactly fixes each PostgreSQL instance
//! that is not on huge pages, how much memory the fleet spends on page tables because of it, and which
//! hosts did not report recently. Everything here is pure: the caller reads the files (in parallel; each
//! file is parsed and assessed on its own by [`load`]) and [`combine`] makes the answer.
//!
//! Pool sizes are the audit's own: its `pool_targets` ([`hostfacts::hugepages::target`], the figure `audit`,
//! `hugepages` and `check` print: every instance's need plus the pages other users of the pool hold), or,
//! for an audit written before it kept them, the same computation over the facts it recorded.
//!
//! Diagnosis files (`preemptlab diagnose --format json`) among the audits are read too: the newest of each
//! host (told apart by its host ID, by its host name in a diagnosis without one) gives one row per instance
//! it observed ([`DiagnosisRow`]), instances with the symptom first.

use results::host::fleet::{
    DiagnosisRow, Failed, Fleet, Group, HostPool, HostRow, InstanceFix, Sizing, Stale, Superseded,
    Totals,
};
use std::collections::{BTreeMap, HashMap};

use crate::hugepages::sizing;
use results::host::audit::Audit;
use results::host::findings::{Severity, Verdict};
use results::host::kernel::PreemptModel;

/// The version of the fleet JSON schema.
pub const SCHEMA_VERSION: u32 = 2;

/// The default age after which an audit is stale: two days (a daily timer that missed one run is not
/// stale yet; one that missed two is).
pub const DEFAULT_STALE_AFTER_S: u64 = 2 * 86_400;

/// How to judge the audits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// "Now", in seconds since the Unix epoch.
    pub now_unix_s: u64,
    /// Audits older than this many seconds are stale.
    pub stale_after_s: u64,
}

/// One file after parsing and assessment.
#[derive(Debug, Clone, PartialEq)]
pub enum Loaded {
    /// A readable audit, assessed.
    Host(Box<Assessed>),
    /// Not a readable audit.
    Failed(Failed),
    /// A diagnosis (`preemptlab diagnose --format json`), one row per instance.
    Diagnosis(Vec<DiagnosisRow>),
}

/// One audit, assessed on its own.
#[derive(Debug, Clone, PartialEq)]
pub struct Assessed {
    /// The host's row.
    pub row: HostRow,
    /// Its instances on 4 KB pages.
    pub instances_4k: Vec<InstanceFix>,
    /// Instances seen.
    pub instances: usize,
    /// Sum of the known full-touch page-table ceilings of the 4 KB instances, in kB.
    pub full_touch_kib: u64,
}

/// Why a file is no audit this preemptlab reads; each message names the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuditError {
    /// Nothing in the file.
    #[error("empty file (the audit did not run or was cut short: rerun `preemptlab audit --format json`)")]
    Empty,
    /// Another schema version.
    #[error("audit schema_version {found}, this preemptlab reads {supported} (run the same preemptlab version on the hosts)")]
    Version {
        /// The file's version.
        found: u64,
        /// The version read here.
        supported: u32,
    },
    /// Not JSON.
    #[error("not JSON ({0}): expected the output of `preemptlab audit --format json`")]
    NotJson(String),
    /// JSON without a schema version.
    #[error("JSON but not a preemptlab audit (no schema_version; {0}): expected the output of `preemptlab audit --format json`")]
    NotAudit(String),
    /// An audit with fields missing or malformed.
    #[error("not a complete audit ({0}): rerun `preemptlab audit --format json`")]
    Incomplete(String),
}

/// Parses an audit document, with a reason that names the fix when it is not one.
pub fn parse_audit(text: &str) -> Result<Audit, AuditError> {
    if text.trim().is_empty() {
        return Err(AuditError::Empty);
    }
    match serde_json::from_str::<Audit>(text) {
        Ok(a) if a.schema_version == crate::audit::SCHEMA_VERSION => Ok(a),
        Ok(a) => Err(AuditError::Version {
            found: u64::from(a.schema_version),
            supported: crate::audit::SCHEMA_VERSION,
        }),
        Err(e) => Err(explain_parse_error(text, &e)),
    }
}

fn explain_parse_error(text: &str, e: &serde_json::Error) -> AuditError {
    /// What any JSON object says of its version (absent fields are None).
    #[derive(serde::Deserialize)]
    struct Versioned {
        schema_version: Option<u64>,
    }
    if serde_json::from_str::<serde::de::IgnoredAny>(text).is_err() {
        return AuditError::NotJson(e.to_string());
    }
    let version = serde_json::from_str::<Versioned>(text)
        .ok()
        .and_then(|v| v.schema_version);
    match version {
        None => AuditError::NotAudit(e.to_string()),
        Some(v) if v != u64::from(crate::audit::SCHEMA_VERSION) => AuditError::Version {
            found: v,
            supported: crate::audit::SCHEMA_VERSION,
        },
        Some(_) => AuditError::Incomplete(e.to_string()),
    }
}

/// The fleet of audits already loaded (a report page's inputs), judged as of the newest audit among them.
pub fn of_audits(audits: &[(&str, &Audit)]) -> Fleet {
    let opts = Options {
        now_unix_s: audits
            .iter()
            .map(|(_, a)| a.generated_unix_s)
            .max()
            .unwrap_or(0),
        stale_after_s: DEFAULT_STALE_AFTER_S,
    };
    let loaded = audits
        .iter()
        .map(|(file, a)| Loaded::Host(Box::new(assess(file, a, &opts))))
        .collect();
    combine(loaded, &opts)
}

/// A report page's fleet: the answer over its audits when there are two or more (one host is no fleet).
pub fn of_several(audits: &[(&str, &Audit)]) -> Option<Fleet> {
    (audits.len() >= 2).then(|| of_audits(audits))
}

/// Parses and assesses one file's text.
pub fn load(file: &str, text: &str, opts: &Options) -> Loaded {
    if let Some(rows) = diagnosis_rows(file, text) {
        return Loaded::Diagnosis(rows);
    }
    match parse_audit(text) {
        Ok(a) => Loaded::Host(Box::new(assess(file, &a, opts))),
        Err(reason) => Loaded::Failed(Failed {
            file: file.to_string(),
            reason: reason.to_string(),
        }),
    }
}

/// The rows of a diagnosis file; None when the text is not one.
fn diagnosis_rows(file: &str, text: &str) -> Option<Vec<DiagnosisRow>> {
    if !text.contains("\"diagnose\"") {
        return None;
    }
    let results::Document::Diagnose(d) = results::Document::from_text(text).ok()? else {
        return None;
    };
    let host = d
        .envelope
        .host
        .hostname
        .value
        .clone()
        .unwrap_or_else(|| file_stem(file));
    let host_id = d
        .envelope
        .host
        .host_id
        .get()
        .filter(|i| !i.is_empty())
        .cloned();
    Some(
        d.instances
            .iter()
            .map(|i| DiagnosisRow {
                host: host.clone(),
                host_id: host_id.clone(),
                file: file.to_string(),
                started_unix_s: d.envelope.started_unix_s,
                postmaster_pid: i.postmaster_pid,
                data_dir: i.data_dir.clone(),
                symptom: i.verdict.symptom,
                spinlock_pct: i.verdict.spinlock_share.pct,
                client_samples: i.verdict.spinlock_share.of,
                segment_faults_per_s: i.rates.segment_faults_per_s,
                segment_page_kib: i.segment.as_ref().map(|s| s.page_size_kib),
                preempted_in_fault_per_s: i.rates.preempted_in_fault_per_s,
            })
            .collect(),
    )
}

/// What tells a diagnosed host from the others: its host ID, else (a diagnosis written before it was kept)
/// its host name as shown. A diagnosis carries no inventory name, and the kernel's host name is shared by
/// clones and defaults (`localhost`), so it is only the fallback.
fn diagnosis_key(row: &DiagnosisRow) -> String {
    match &row.host_id {
        Some(id) => format!("host-id {id}"),
        None => format!("hostname {}", row.host),
    }
}

/// Shows the start of the host ID after the host name of each diagnosed host whose name another one shares
/// (`diagnosed`: the rows of each host, by [`diagnosis_key`]).
fn tell_shared_names_apart(diagnosed: &mut HashMap<String, Vec<DiagnosisRow>>) {
    let mut hosts_named: HashMap<String, usize> = HashMap::new();
    for rows in diagnosed.values() {
        if let Some(first) = rows.first() {
            *hosts_named.entry(first.host.clone()).or_default() += 1;
        }
    }
    for row in diagnosed.values_mut().flatten() {
        if let (Some(id), Some(2..)) = (&row.host_id, hosts_named.get(&row.host)) {
            // By characters: the ID comes from a file, which need not hold hex digits.
            let start: String = id.chars().take(8).collect();
            row.host = format!("{} (host ID {start})", row.host);
        }
    }
}

fn file_stem(file: &str) -> String {
    let base = file.rsplit('/').next().unwrap_or(file);
    base.strip_suffix(".json").unwrap_or(base).to_string()
}

/// What tells a host from the others: its host ID (the machine ID hashed, `hostid`) with the inventory
/// name where the audit has both (a cloned image that kept its machine ID is still two hosts under two
/// names), either alone; an audit with neither (an older binary's, a host without /etc/machine-id audited
/// without `--inventory-name`) by the kernel's host name as before, so that a directory of its daily audits
/// still answers once per host; else the file. With the `--sysroot` read, if any. The kernel's host name is
/// never used beside an ID or an inventory name: clones and defaults (`localhost`) share it.
pub fn host_key(a: &Audit, file: &str) -> String {
    let name = a.inventory_name.as_deref().filter(|n| !n.is_empty());
    let mut key = match (a.host_id.get(), name) {
        (Some(id), Some(n)) => format!("host-id {id} name {n}"),
        (Some(id), None) => format!("host-id {id}"),
        (None, Some(n)) => format!("name {n}"),
        (None, None) => match a.hostname.get().filter(|h| !h.is_empty()) {
            Some(h) => format!("hostname {h}"),
            None => format!("file {file}"),
        },
    };
    if let Some(root) = &a.sysroot {
        key = format!("{key} sysroot {root}");
    }
    key
}

/// Assesses one audit: the host's row and its instances on 4 KB pages with their fixes.
pub fn assess(file: &str, a: &Audit, opts: &Options) -> Assessed {
    let hostname = a.hostname.get().filter(|h| !h.is_empty()).cloned();
    let inventory_name = a.inventory_name.clone().filter(|n| !n.is_empty());
    let host = inventory_name
        .clone()
        .or_else(|| hostname.clone())
        .unwrap_or_else(|| file_stem(file));
    let age_s = opts.now_unix_s as i64 - a.generated_unix_s as i64;
    let mut instances_4k = Vec::new();
    let mut full_touch_kib = 0;
    let targets = crate::hugepages::target::targets_of(a);
    for inst in &a.instances {
        if inst.on_huge_pages.get() != Some(&false) {
            continue;
        }
        let full_touch = inst.page_tables_full_touch_kib.get().copied();
        full_touch_kib += full_touch.unwrap_or(0);
        let found = targets
            .iter()
            .find_map(|t| t.need_of(inst.postmaster_pid).map(|n| (t, n)));
        let (sizing, unsized_reason, mut fix) = match found {
            Some((t, need)) => {
                let mut fix: Vec<String> = t
                    .commands
                    .iter()
                    .enumerate()
                    .map(|(i, c)| match i {
                        0 => format!("{c}   # {}", t.describe_for(Some(inst.postmaster_pid))),
                        _ => c.clone(),
                    })
                    .collect();
                // Settings, not commands: comments, so the fix stays pasteable.
                fix.extend(
                    sizing::postgresql_conf_lines(t.page_size_kib, t.default_page_size_kib)
                        .iter()
                        .map(|l| match l.split_once(" # ") {
                            Some((setting, note)) => {
                                format!(
                                    "# in postgresql.conf: {} ({})",
                                    setting.trim(),
                                    note.trim()
                                )
                            }
                            None => format!("# in postgresql.conf: {l}"),
                        }),
                );
                let sizing = Sizing {
                    page_size_kib: t.page_size_kib,
                    basis: need.basis.kind().to_string(),
                    pages_needed: need.pages_needed,
                    pool_now: t.persistent,
                    pool_target: t.target,
                    pinned_kib: need.pages_needed.saturating_mul(t.page_size_kib),
                };
                (Some(sizing), None, fix)
            }
            None => {
                let why = targets
                    .iter()
                    .flat_map(|t| &t.not_sized)
                    .find(|u| u.postmaster_pid == inst.postmaster_pid)
                    .map(|u| u.why.clone())
                    .unwrap_or_else(|| "the audit has no pool target for it".into());
                (
                    None,
                    Some(why),
                    vec![format!(
                        "preemptlab hugepages --pid {}   # on {host}: the audit lacks the segment size",
                        inst.postmaster_pid
                    )],
                )
            }
        };
        fix.push(crate::findings::RESTART_THEN_AUDIT.into());
        instances_4k.push(InstanceFix {
            host: host.clone(),
            file: file.to_string(),
            postmaster_pid: inst.postmaster_pid,
            data_dir: inst.data_dir.get().cloned(),
            version: inst.version.get().cloned(),
            huge_pages: inst.setting("huge_pages").map(String::from),
            segment_kib: inst.segment.get().map(|s| s.size_kib),
            page_tables_kib: inst.page_tables_kib,
            page_tables_full_touch_kib: full_touch,
            sizing,
            unsized_reason,
            fix,
        });
    }
    let mut above_info: Vec<_> = a
        .findings
        .iter()
        .filter(|f| f.severity >= Severity::Warn)
        .collect();
    above_info.sort_by_key(|f| std::cmp::Reverse(f.severity));
    let row = HostRow {
        host,
        hostname,
        inventory_name,
        key: host_key(a, file),
        file: file.to_string(),
        sysroot: a.sysroot.clone(),
        verdict: a.verdict,
        kernel: a
            .kernel
            .release
            .get()
            .cloned()
            .unwrap_or_else(|| "unknown".into()),
        preempt_model: a.kernel.preemption.model,
        cpus: a.kernel.cpus.get().copied(),
        generated_unix_s: a.generated_unix_s,
        age_s,
        stale: age_s > opts.stale_after_s as i64,
        critical: above_info
            .iter()
            .filter(|f| f.severity == Severity::Critical)
            .count(),
        warn: above_info
            .iter()
            .filter(|f| f.severity == Severity::Warn)
            .count(),
        finding_ids: above_info.iter().map(|f| f.id.clone()).collect(),
        top_finding: above_info.first().map(|f| f.title.clone()),
        instances: a.instances.len(),
        instances_4k: instances_4k.len(),
        page_tables_4k_kib: instances_4k.iter().map(|i| i.page_tables_kib).sum(),
        pools: targets
            .iter()
            .map(|t| HostPool {
                page_size_kib: t.page_size_kib,
                target: t.target,
                pool_now: t.persistent.map(|_| t.operators_pool()),
                shortfall: t.shortfall(),
            })
            .collect(),
    };
    Assessed {
        row,
        instances_4k,
        instances: a.instances.len(),
        full_touch_kib,
    }
}

/// Verdicts ranked for sorting: at-risk first.
pub fn verdict_rank(v: Verdict) -> u8 {
    match v {
        Verdict::AtRisk => 0,
        Verdict::Warn => 1,
        Verdict::Ok => 2,
    }
}

/// Makes the fleet answer from every file's outcome.
pub fn combine(loaded: Vec<Loaded>, opts: &Options) -> Fleet {
    let files = loaded.len();
    let Newest {
        assessed,
        failed,
        superseded,
        diagnosed,
    } = newest(loaded);
    let mut totals = Totals {
        files,
        hosts: assessed.len(),
        failed: failed.len(),
        superseded: superseded.len(),
        ..Totals::default()
    };
    let (groups, hosts, not_on_huge_pages) = tally(assessed, &mut totals);
    let stale = stale(&hosts);
    let mut groups: Vec<Group> = groups.into_values().collect();
    groups.sort_by(|a, b| {
        (b.at_risk, b.warn, b.hosts, &a.kernel, a.preempt_model).cmp(&(
            a.at_risk,
            a.warn,
            a.hosts,
            &b.kernel,
            b.preempt_model,
        ))
    });
    let diagnoses = ranked_diagnoses(diagnosed);
    Fleet {
        schema_version: SCHEMA_VERSION,
        now_unix_s: opts.now_unix_s,
        stale_after_s: opts.stale_after_s,
        totals,
        hosts,
        groups,
        not_on_huge_pages,
        stale,
        failed,
        diagnoses,
        superseded,
    }
}

/// Each host's newest audit (the others superseded), the files that failed, each host's newest diagnosis.
struct Newest {
    assessed: Vec<Assessed>,
    failed: Vec<Failed>,
    superseded: Vec<Superseded>,
    diagnosed: HashMap<String, Vec<DiagnosisRow>>,
}

/// Keeps each host's newest audit and diagnosis; sorts the hosts at-risk first, then by kernel, model, name.
fn newest(loaded: Vec<Loaded>) -> Newest {
    let mut failed = Vec::new();
    let mut newest: HashMap<String, Assessed> = HashMap::new();
    let mut superseded = Vec::new();
    // The newest diagnosis file of each host.
    let mut diagnosed: HashMap<String, Vec<DiagnosisRow>> = HashMap::new();
    for l in loaded {
        let a = match l {
            Loaded::Failed(f) => {
                failed.push(f);
                continue;
            }
            Loaded::Diagnosis(rows) => {
                if let Some(first) = rows.first() {
                    let key = diagnosis_key(first);
                    let newer = diagnosed.get(&key).is_none_or(|kept| {
                        (first.started_unix_s, &first.file)
                            > (kept[0].started_unix_s, &kept[0].file)
                    });
                    if newer {
                        diagnosed.insert(key, rows);
                    }
                }
                continue;
            }
            Loaded::Host(a) => *a,
        };
        let key = a.row.key.clone();
        match newest.get_mut(&key) {
            None => {
                newest.insert(key, a);
            }
            Some(kept) => {
                // The newer audit wins; at equal times the later file name, so the choice is stable.
                let newer = (a.row.generated_unix_s, &a.row.file)
                    > (kept.row.generated_unix_s, &kept.row.file);
                let (old, new) = if newer {
                    (std::mem::replace(kept, a), &kept.row)
                } else {
                    (a, &kept.row)
                };
                superseded.push(Superseded {
                    host: old.row.host,
                    file: old.row.file,
                    newer_file: new.file.clone(),
                });
            }
        }
    }
    let mut assessed: Vec<Assessed> = newest.into_values().collect();
    assessed.sort_by(|a, b| {
        let (a, b) = (&a.row, &b.row);
        (
            verdict_rank(a.verdict),
            &a.kernel,
            a.preempt_model,
            &a.host,
            &a.file,
        )
            .cmp(&(
                verdict_rank(b.verdict),
                &b.kernel,
                b.preempt_model,
                &b.host,
                &b.file,
            ))
    });
    failed.sort_by(|a, b| a.file.cmp(&b.file));
    superseded.sort_by(|a, b| (&a.host, &a.file).cmp(&(&b.host, &b.file)));

    Newest {
        assessed,
        failed,
        superseded,
        diagnosed,
    }
}

/// The hosts by kernel and preemption model.
type Groups = BTreeMap<(String, PreemptModel), Group>;

/// The hosts counted into `totals` and into groups by kernel and preemption model; their instances on
/// 4 KB pages.
fn tally(assessed: Vec<Assessed>, totals: &mut Totals) -> (Groups, Vec<HostRow>, Vec<InstanceFix>) {
    let mut groups: Groups = BTreeMap::new();
    let mut hosts = Vec::with_capacity(assessed.len());
    let mut not_on_huge_pages = Vec::new();
    for a in assessed {
        let r = &a.row;
        let g = groups
            .entry((r.kernel.clone(), r.preempt_model))
            .or_insert_with(|| Group {
                kernel: r.kernel.clone(),
                preempt_model: r.preempt_model,
                hosts: 0,
                at_risk: 0,
                warn: 0,
                ok: 0,
                instances_4k: 0,
            });
        g.hosts += 1;
        g.instances_4k += r.instances_4k;
        match r.verdict {
            Verdict::AtRisk => {
                g.at_risk += 1;
                totals.at_risk += 1
            }
            Verdict::Warn => {
                g.warn += 1;
                totals.warn += 1
            }
            Verdict::Ok => {
                g.ok += 1;
                totals.ok += 1
            }
        }
        totals.stale += usize::from(r.stale);
        totals.instances += a.instances;
        totals.instances_4k += r.instances_4k;
        totals.page_tables_4k_kib += r.page_tables_4k_kib;
        totals.page_tables_4k_full_touch_kib += a.full_touch_kib;
        totals.fix_pinned_kib += a
            .instances_4k
            .iter()
            .filter_map(|i| i.sizing.as_ref())
            .map(|s| s.pinned_kib)
            .sum::<u64>();
        not_on_huge_pages.extend(a.instances_4k);
        hosts.push(a.row);
    }
    (groups, hosts, not_on_huge_pages)
}

/// The hosts whose audit is stale, oldest first.
fn stale(hosts: &[HostRow]) -> Vec<Stale> {
    let mut stale: Vec<Stale> = hosts
        .iter()
        .filter(|h| h.stale)
        .map(|h| Stale {
            host: h.host.clone(),
            file: h.file.clone(),
            generated_unix_s: h.generated_unix_s,
            age_s: h.age_s,
        })
        .collect();
    stale.sort_by(|a, b| (b.age_s, &a.host).cmp(&(a.age_s, &b.host)));
    stale
}

/// The diagnoses, shared names told apart, the symptom present first.
fn ranked_diagnoses(mut diagnosed: HashMap<String, Vec<DiagnosisRow>>) -> Vec<DiagnosisRow> {
    tell_shared_names_apart(&mut diagnosed);
    let mut diagnoses: Vec<DiagnosisRow> = diagnosed.into_values().flatten().collect();
    diagnoses.sort_by(|a, b| {
        let rank = |r: &DiagnosisRow| match r.symptom {
            results::diagnose::Symptom::Present => 0,
            results::diagnose::Symptom::CantTell => 1,
            results::diagnose::Symptom::NotPresent => 2,
        };
        (rank(a), &a.host, a.postmaster_pid).cmp(&(rank(b), &b.host, b.postmaster_pid))
    });
    diagnoses
}

/// An age that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgeError {
    /// No number first.
    #[error("{0:?}: use a number and a unit: 90m, 36h, 2d, 1w")]
    Number(String),
    /// No known unit.
    #[error("{0:?}: use a number and a unit (s, m, h, d, w): 90m, 36h, 2d, 1w")]
    Unit(String),
    /// More seconds than fit.
    #[error("{0:?}: too large")]
    TooLarge(String),
}

/// Parses an age such as `90m`, `36h`, `2d` or `1w` into seconds: a whole number and a unit of at least a
/// second (`duration::duration_parts`).
pub fn parse_age(text: &str) -> Result<u64, AgeError> {
    let parts = crate::duration::duration_parts(text);
    let num = parts.map_or(text.trim(), |(num, _)| num);
    let n: u64 = num
        .parse()
        .map_err(|_| AgeError::Number(text.to_string()))?;
    let mult = match parts {
        Ok((_, Some(secs))) if secs >= 1.0 => secs as u64,
        _ => return Err(AgeError::Unit(text.to_string())),
    };
    n.checked_mul(mult)
        .ok_or_else(|| AgeError::TooLarge(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse_with_units_only() {
        assert_eq!(parse_age("2d"), Ok(172_800));
        assert_eq!(parse_age("90m"), Ok(5400));
        assert_eq!(parse_age("1w"), Ok(604_800));
        assert_eq!(parse_age("36h"), Ok(129_600));
        assert!(parse_age("2").unwrap_err().to_string().contains("unit"));
        assert!(parse_age("two days").is_err());
        assert!(parse_age("2x").is_err());
        assert!(parse_age("99999999999999999999d").is_err());
    }

    #[test]
    fn bad_text_is_explained_not_fatal() {
        let opts = Options {
            now_unix_s: 0,
            stale_after_s: 1,
        };
        for (text, want) in [
            ("", "empty file"),
            ("{\"schema_version\": 1, ", "not JSON"),
            ("[1, 2]", "not a preemptlab audit"),
            ("{\"schema_version\": 99}", "schema_version 99"),
            (
                "{\"schema_version\": 1, \"hostname\": 3}",
                "not a complete audit",
            ),
        ] {
            match load("x.json", text, &opts) {
                Loaded::Failed(f) => assert!(f.reason.contains(want), "{text:?}: {}", f.reason),
                Loaded::Host(_) | Loaded::Diagnosis(_) => panic!("{text:?} accepted"),
            }
        }
    }

    #[test]
    fn empty_fleet_is_an_empty_answer() {
        let f = combine(
            vec![],
            &Options {
                now_unix_s: 0,
                stale_after_s: 1,
            },
        );
        assert_eq!(f.totals, Totals::default());
        assert!(f.hosts.is_empty() && f.groups.is_empty() && f.failed.is_empty());
    }
}
