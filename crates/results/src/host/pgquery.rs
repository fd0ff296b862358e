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
    /// The PID of the backend serving this connection (matches the server to a discovered instance).
    pub backend_pid: u32,
    /// The settings found, by name.
    pub settings: BTreeMap<String, Setting>,
}

/// A `--pg` server that could not be asked: the audit goes on without its figures and says so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgFailure {
    /// The DSN with any password removed.
    pub dsn: String,
    /// What went wrong, with the server's or the client's message.
    pub error: String,
}
