//! `compare`'s inputs: a result file reduced to its kind, host, spec fields and, per cell, the key fields
//! and each metric's samples (taken through the typed accessors of [`METRICS`]).

use std::collections::BTreeMap;

use results::document::SpecField;
use results::host::HostFacts;
use results::metrics::METRICS;
use results::vm::VmBlock;
use results::{Document, Kind};

use crate::CompareError;

/// One cell of an input: its key fields and, per metric of [`METRICS`] (same index), the repetitions'
/// values.
#[derive(Debug, Clone)]
pub struct CellSamples {
    /// Key field -> value (every field naming what the cell ran).
    pub key: BTreeMap<String, String>,
    /// Per metric, in [`METRICS`] order: one value per repetition that records it.
    pub samples: Vec<Vec<f64>>,
}

/// One input: a result file (or a part of one, see [`split`](crate::split)).
#[derive(Debug, Clone)]
pub struct Input {
    /// A label (the file name).
    pub label: String,
    /// The bench.
    pub kind: Kind,
    /// The host it ran on.
    pub host: Option<HostFacts>,
    /// How it ran in a guest (`preemptlab vm`): the machine and emulator beneath; `None` outside a VM.
    pub vm: Option<VmBlock>,
    /// The spec's fields.
    pub spec: Vec<SpecField>,
    /// The cells.
    pub cells: Vec<CellSamples>,
    /// When it started (Unix seconds), when the document says.
    pub started_unix_s: Option<u64>,
}

impl Input {
    /// The input of a loaded document; errors when it is not a bench or sim result.
    pub fn new(label: impl Into<String>, doc: &Document) -> Result<Input, CompareError> {
        let label = label.into();
        let (Some(cells), Some(spec)) = (doc.cells(), doc.spec_fields()) else {
            return Err(CompareError::NotResult {
                label,
                kind: doc.kind().to_string(),
            });
        };
        let cells = cells
            .into_iter()
            .map(|c| CellSamples {
                key: c.key.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
                samples: METRICS
                    .iter()
                    .map(|m| c.reps.iter().filter_map(|r| (m.get)(*r)).collect())
                    .collect(),
            })
            .collect();
        Ok(Input {
            label,
            kind: doc.kind(),
            host: doc.host().cloned(),
            vm: doc.vm().cloned(),
            spec,
            cells,
            started_unix_s: doc.envelope().map(|e| e.started_unix_s),
        })
    }

    pub(crate) fn host_fact(&self, get: fn(&HostFacts) -> String) -> Option<String> {
        self.host.as_ref().map(get)
    }

    /// A fact of the `vm` block as text; `-` outside a VM.
    pub(crate) fn vm_fact(&self, get: fn(&VmBlock) -> String) -> String {
        self.vm.as_ref().map(get).unwrap_or_else(|| "-".into())
    }

    pub(crate) fn spec_json(&self, name: &str) -> Option<&str> {
        self.spec
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.json.as_str())
    }
}
