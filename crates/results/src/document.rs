//! The typed loader: one file's text to the right result type, by its `kind`, after checking its
//! `schema_version`.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::check::CheckDoc;
use crate::diagnose::DiagnoseResult;
use crate::host::{Audit, HostFacts};
use crate::hugepages::HugepagesDoc;
use crate::latency::LatencyResult;
use crate::lock::LockResult;
use crate::metrics::RepRef;
use crate::net::NetResult;
use crate::pg::PgResult;
use crate::sim::SimResult;
use crate::{Envelope, Status, SCHEMA_VERSION};

/// What a document is, as its `kind` field names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `bench lock`.
    BenchLock,
    /// `bench pg`.
    BenchPg,
    /// `bench latency`.
    BenchLatency,
    /// `bench net`.
    BenchNet,
    /// `sim`.
    Sim,
    /// `check --format json`.
    Check,
    /// `audit --format json`.
    Audit,
    /// `hugepages --format json`.
    Hugepages,
    /// `diagnose`.
    Diagnose,
}

impl Kind {
    /// Every kind, in the order above.
    pub const ALL: [Kind; 9] = [
        Kind::BenchLock,
        Kind::BenchPg,
        Kind::BenchLatency,
        Kind::BenchNet,
        Kind::Sim,
        Kind::Check,
        Kind::Audit,
        Kind::Hugepages,
        Kind::Diagnose,
    ];

    /// The `kind` field's value.
    pub fn name(self) -> &'static str {
        match self {
            Kind::BenchLock => "bench-lock",
            Kind::BenchPg => "bench-pg",
            Kind::BenchLatency => "bench-latency",
            Kind::BenchNet => "bench-net",
            Kind::Sim => "sim",
            Kind::Check => "check",
            Kind::Audit => "audit",
            Kind::Hugepages => "hugepages",
            Kind::Diagnose => "diagnose",
        }
    }

    /// The kind a `kind` field names, if any.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Kind::from_name(&s).ok_or_else(|| serde::de::Error::custom(LoadError::UnknownKind(s)))
    }
}

/// Why a text is not a document this version reads.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Not JSON at all.
    #[error("not JSON ({0}); give preemptlab result files")]
    NotJson(String),
    /// JSON without a schema version.
    #[error("not a preemptlab result file (no schema_version)")]
    NoSchemaVersion,
    /// Written by a newer preemptlab.
    #[error("schema_version {found} is newer than this preemptlab reads ({supported}); use a newer preemptlab")]
    FutureVersion {
        /// The file's version.
        found: u64,
        /// The newest this build reads.
        supported: u32,
    },
    /// A `kind` this version does not know.
    #[error("unknown kind {0:?} (known: bench-lock, bench-pg, bench-latency, bench-net, sim, check, audit, hugepages, diagnose)")]
    UnknownKind(String),
    /// The right kind, the wrong shape.
    #[error("not a valid {kind} document: {error}")]
    Shape {
        /// The kind it claimed.
        kind: Kind,
        /// serde's complaint (names the field).
        error: String,
    },
}

/// One loaded document.
#[derive(Debug, Clone, PartialEq)]
pub enum Document {
    /// `bench lock`.
    Lock(LockResult),
    /// `bench pg`.
    Pg(PgResult),
    /// `bench latency`.
    Latency(LatencyResult),
    /// `bench net`.
    Net(NetResult),
    /// `sim`.
    Sim(SimResult),
    /// `check`.
    Check(Box<CheckDoc>),
    /// `audit`.
    Audit(Box<Audit>),
    /// `hugepages`.
    Hugepages(HugepagesDoc),
    /// `diagnose`.
    Diagnose(Box<DiagnoseResult>),
}

fn typed<T: DeserializeOwned>(kind: Kind, v: serde_json::Value) -> Result<T, LoadError> {
    serde_json::from_value(v).map_err(|e| LoadError::Shape {
        kind,
        error: e.to_string(),
    })
}

/// One key field of a cell, as it reads: a string as is, a number in decimal, an absent value `null`.
fn scalar<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "-".into(),
    }
}

/// A scalar or list field of a spec, as JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecField {
    /// The field's name.
    pub name: String,
    /// Its value as JSON (`"pg"`, `3`, `["pg","mcs"]`).
    pub json: String,
    /// True for lists and pairs (the matrix axes).
    pub list: bool,
}

/// A cell as `compare` sees it: its key fields (every field naming what it ran but `status` and
/// `reason`), its status and its repetitions.
#[derive(Debug, Clone)]
pub struct CellView<'a> {
    /// (field, value), in field-name order.
    pub key: Vec<(&'static str, String)>,
    /// Ran, skipped, ...
    pub status: Status,
    /// The repetitions, typed.
    pub reps: Vec<RepRef<'a>>,
}

fn view<'a, R>(
    mut key: Vec<(&'static str, String)>,
    status: Status,
    reps: &'a [R],
    f: fn(&'a R) -> RepRef<'a>,
) -> CellView<'a> {
    key.sort_by_key(|(k, _)| *k);
    CellView {
        key,
        status,
        reps: reps.iter().map(f).collect(),
    }
}

impl Document {
    /// Reads a document from its text: checks `schema_version` (a newer one is refused), dispatches on
    /// `kind` (an unknown one is refused) and deserializes. A document without `kind` is an audit, or a check
    /// written before check documents recorded their kind: it is read as a check if it has a check's shape,
    /// else as an audit.
    pub fn from_text(text: &str) -> Result<Document, LoadError> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| LoadError::NotJson(e.to_string()))?;
        let version = v
            .get("schema_version")
            .and_then(|s| s.as_u64())
            .ok_or(LoadError::NoSchemaVersion)?;
        if version > u64::from(SCHEMA_VERSION) {
            return Err(LoadError::FutureVersion {
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        let kind = match v.get("kind") {
            Some(serde_json::Value::String(k)) => {
                Kind::from_name(k).ok_or_else(|| LoadError::UnknownKind(k.clone()))?
            }
            Some(other) => return Err(LoadError::UnknownKind(other.to_string())),
            None => {
                return match serde_json::from_value::<CheckDoc>(v.clone()) {
                    Ok(c) => Ok(Document::Check(Box::new(c))),
                    Err(_) => typed(Kind::Audit, v).map(|a| Document::Audit(Box::new(a))),
                };
            }
        };
        Ok(match kind {
            Kind::BenchLock => Document::Lock(typed(kind, v)?),
            Kind::BenchPg => Document::Pg(typed(kind, v)?),
            Kind::BenchLatency => Document::Latency(typed(kind, v)?),
            Kind::BenchNet => Document::Net(typed(kind, v)?),
            Kind::Sim => Document::Sim(typed(kind, v)?),
            Kind::Check => Document::Check(Box::new(typed(kind, v)?)),
            Kind::Audit => Document::Audit(Box::new(typed(kind, v)?)),
            Kind::Hugepages => Document::Hugepages(typed(kind, v)?),
            Kind::Diagnose => Document::Diagnose(Box::new(typed(kind, v)?)),
        })
    }

    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            Document::Lock(_) => Kind::BenchLock,
            Document::Pg(_) => Kind::BenchPg,
            Document::Latency(_) => Kind::BenchLatency,
            Document::Net(_) => Kind::BenchNet,
            Document::Sim(_) => Kind::Sim,
            Document::Check(_) => Kind::Check,
            Document::Audit(_) => Kind::Audit,
            Document::Hugepages(_) => Kind::Hugepages,
            Document::Diagnose(_) => Kind::Diagnose,
        }
    }

    /// The envelope of a bench or sim result (`None` for check, audit and hugepages documents).
    pub fn envelope(&self) -> Option<&Envelope> {
        match self {
            Document::Lock(r) => Some(&r.envelope),
            Document::Pg(r) => Some(&r.envelope),
            Document::Latency(r) => Some(&r.envelope),
            Document::Net(r) => Some(&r.envelope),
            Document::Sim(r) => Some(&r.envelope),
            Document::Diagnose(r) => Some(&r.envelope),
            _ => None,
        }
    }

    /// The host facts of a result.
    pub fn host(&self) -> Option<&HostFacts> {
        self.envelope().map(|e| &e.host)
    }

    /// The `vm` block of a result measured in a guest (`preemptlab vm`); `None` outside a VM.
    pub fn vm(&self) -> Option<&crate::vm::VmBlock> {
        self.envelope().and_then(|e| e.vm.as_ref())
    }

    /// The spec's fields, in name order (results only).
    pub fn spec_fields(&self) -> Option<Vec<SpecField>> {
        let spec = match self {
            Document::Lock(r) => serde_json::to_value(&r.spec),
            Document::Pg(r) => serde_json::to_value(&r.spec),
            Document::Latency(r) => serde_json::to_value(&r.spec),
            Document::Net(r) => serde_json::to_value(&r.spec),
            Document::Sim(r) => serde_json::to_value(&r.spec),
            Document::Diagnose(r) => serde_json::to_value(&r.spec),
            _ => return None,
        };
        let Ok(serde_json::Value::Object(o)) = spec else {
            return Some(Vec::new());
        };
        let mut fields: Vec<SpecField> = o
            .into_iter()
            .map(|(name, v)| SpecField {
                name,
                json: v.to_string(),
                list: v.is_array(),
            })
            .collect();
        fields.sort_by(|a, b| a.name.cmp(&b.name));
        Some(fields)
    }

    /// The cells of a result, keyed (results only). A cell that ran under a preemption model of its own
    /// (`--switch-preempt` with several) has it as the key field `preempt`.
    pub fn cells(&self) -> Option<Vec<CellView<'_>>> {
        Some(match self {
            Document::Lock(r) => r
                .cells
                .iter()
                .map(|c| {
                    let key = vec![
                        ("lock", scalar(&c.lock)),
                        ("pages", scalar(&c.pages)),
                        ("workers", scalar(&c.workers)),
                    ];
                    view(
                        with_preempt(key, c.preempt),
                        c.status,
                        &c.reps,
                        RepRef::Lock,
                    )
                })
                .collect(),
            Document::Pg(r) => r
                .cells
                .iter()
                .map(|c| {
                    // The axes only. A file made before builds were an axis ran one build, its pg_bin,
                    // so its cells pair with a newer file's by the same name. The huge pages a server
                    // needed are an outcome of the build and shared_buffers, not a key (15 and 18 need
                    // different counts, and their cells must still pair).
                    let build = match &c.build {
                        Some(b) => b.name.clone(),
                        None => r.spec.pg_bin.clone(),
                    };
                    let key = vec![
                        ("build", build),
                        ("shared_buffers", scalar(&c.shared_buffers)),
                        ("huge_pages", scalar(&c.huge_pages)),
                        ("clients", scalar(&c.clients)),
                    ];
                    view(with_preempt(key, c.preempt), c.status, &c.reps, RepRef::Pg)
                })
                .collect(),
            Document::Latency(r) => r
                .cells
                .iter()
                .map(|c| {
                    let key = vec![
                        ("policy", scalar(&c.policy)),
                        ("load", scalar(&c.load)),
                        ("threads", scalar(&c.threads)),
                    ];
                    view(
                        with_preempt(key, c.preempt),
                        c.status,
                        &c.reps,
                        RepRef::Latency,
                    )
                })
                .collect(),
            Document::Net(r) => r
                .cells
                .iter()
                .map(|c| {
                    let key = vec![
                        ("test", scalar(&c.test)),
                        ("msg_size", scalar(&c.msg_size)),
                        ("streams", scalar(&c.streams)),
                        ("path", scalar(&c.path)),
                    ];
                    view(with_preempt(key, c.preempt), c.status, &c.reps, RepRef::Net)
                })
                .collect(),
            Document::Sim(r) => r
                .cells
                .iter()
                .map(|c| {
                    let key = vec![
                        ("model", scalar(&c.model)),
                        ("lock", scalar(&c.lock)),
                        ("pages", scalar(&c.pages)),
                        ("cpus", scalar(&c.cpus)),
                        ("workers", scalar(&c.workers)),
                        ("sweep", scalar(&c.sweep)),
                    ];
                    view(key, c.status, &c.reps, RepRef::Sim)
                })
                .collect(),
            // One cell per instance, keyed by its data directory (a postmaster PID changes across the
            // restart a fix needs); its seconds are the repetitions.
            Document::Diagnose(r) => r
                .instances
                .iter()
                .map(|i| {
                    let key = vec![(
                        "instance",
                        i.data_dir
                            .clone()
                            .unwrap_or_else(|| format!("postmaster {}", i.postmaster_pid)),
                    )];
                    view(key, Status::Ok, &i.series, RepRef::Diagnose)
                })
                .collect(),
            _ => return None,
        })
    }
}

/// A bench cell's key with its own preemption model, when it has one.
fn with_preempt(
    mut key: Vec<(&'static str, String)>,
    preempt: Option<axes::model::Model>,
) -> Vec<(&'static str, String)> {
    if let Some(m) = preempt {
        key.push(("preempt", m.name().to_string()));
    }
    key
}
