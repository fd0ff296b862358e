//! A fact is a value together with where it came from, or the reason it could not be had.
//!
//! The audit never aborts because one file is unreadable: it records the fact as unavailable with the
//! reason ("permission denied (needs root)") and goes on.

use serde::{Deserialize, Serialize};

/// One observed value with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fact<T> {
    /// The value; `null` when it could not be read.
    pub value: Option<T>,
    /// Where it came from or was looked for: a path, a query or a probe.
    pub source: String,
    /// Why the value is missing; absent when the value is present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

impl<T> Fact<T> {
    /// A value read from `source`.
    pub fn known(value: T, source: impl Into<String>) -> Self {
        Fact {
            value: Some(value),
            source: source.into(),
            unavailable: None,
        }
    }

    /// A value that could not be read from `source`, and why.
    pub fn unavailable(source: impl Into<String>, reason: impl Into<String>) -> Self {
        Fact {
            value: None,
            source: source.into(),
            unavailable: Some(reason.into()),
        }
    }

    /// The value, if known.
    pub fn get(&self) -> Option<&T> {
        self.value.as_ref()
    }

    /// Transforms the value, keeping the provenance.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Fact<U> {
        Fact {
            value: self.value.map(f),
            source: self.source,
            unavailable: self.unavailable,
        }
    }

    /// Transforms the value with a fallible parser; a parse failure makes the fact unavailable.
    pub fn and_then<U, E: std::fmt::Display>(self, f: impl FnOnce(T) -> Result<U, E>) -> Fact<U> {
        match self.value {
            Some(v) => match f(v) {
                Ok(u) => Fact::known(u, self.source),
                Err(e) => Fact::unavailable(self.source, format!("unparseable: {e}")),
            },
            None => Fact {
                value: None,
                source: self.source,
                unavailable: self.unavailable,
            },
        }
    }

    /// Uses `other` when this fact is unavailable.
    pub fn or(self, other: Fact<T>) -> Fact<T> {
        if self.value.is_some() {
            self
        } else {
            other
        }
    }

    /// A short human description: the value via `show`, or "unavailable: reason".
    pub fn describe(&self, show: impl FnOnce(&T) -> String) -> String {
        match &self.value {
            Some(v) => show(v),
            None => format!(
                "unavailable: {}",
                self.unavailable.as_deref().unwrap_or("unknown reason")
            ),
        }
    }
}
