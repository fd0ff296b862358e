//! What a running server said when asked (read-only).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One `pg_settings` row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setting {
    /// `setting`, as text.
    pub setting: String,
    /// `unit` (`8kB`, `kB`, `MB`), if any.
    pub unit: Option<String>,
}

/// What one `--pg` connection returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerInfo {
    /// The DSN with any password removed.
    pub dsn: String,
    /// The PID of the backend serving this connection (matches the server to a discovered instance), in
    /// the server's PID namespace.
    pub backend_pid: u32,
    /// The same backend's PID on this host, when the server runs in a PID namespace of its own (absent:
    /// the same as `backend_pid`, or not matched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_host_pid: Option<u32>,
    /// The settings found, by name.
    pub settings: BTreeMap<String, Setting>,
}

impl ServerInfo {
    /// The serving backend's PID on this host.
    pub fn host_pid(&self) -> u32 {
        self.backend_host_pid.unwrap_or(self.backend_pid)
    }
}

/// A `--pg` server that could not be asked: the audit goes on without its figures and says so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgFailure {
    /// The DSN with any password removed.
    pub dsn: String,
    /// What went wrong, with the server's or the client's message.
    pub error: String,
}
