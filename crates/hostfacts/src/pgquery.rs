//! Read-only queries of a running PostgreSQL server (`--pg DSN`).
//!
//! Settings come from `pg_settings`, so a setting the server version lacks (`huge_pages_status` before
//! PG 17, `shared_memory_size_in_huge_pages` before PG 15) is simply absent. The session is read-only and
//! the connect timeout is 5 s unless the DSN sets one. The client (`query`, `query_all`) needs the
//! default `pg-client` feature; the types and `redact` do not.
//!
//! Peer authentication, Debian's default for local connections (pg_hba.conf `local all postgres peer`),
//! lets a unix-socket connection in as the database user named like the connecting process's OS user. A
//! root process asked for `host=/var/run/postgresql user=postgres` would be refused ("Peer authentication
//! failed"), so as root a DSN whose every host is a socket directory and whose `user` is an OS account
//! connects with that account's effective IDs ([`osutil::account::as_account`]): what `sudo -u postgres`
//! would give, for the connect only.

#[cfg(feature = "pg-client")]
use results::host::pgquery::{PgFailure, ServerInfo, Setting};
#[cfg(feature = "pg-client")]
use std::collections::BTreeMap;

/// The settings the audit asks for.
pub const SETTINGS: [&str; 10] = [
    "server_version",
    "shared_buffers",
    "huge_pages",
    "huge_page_size",
    "huge_pages_status",
    "shared_memory_size",
    "shared_memory_size_in_huge_pages",
    "max_connections",
    "data_directory",
    "port",
];

#[cfg(feature = "pg-client")]
/// Errors of a `--pg` query.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The DSN does not parse.
    #[error("bad DSN {dsn:?}: {} (expected e.g. 'host=/var/run/postgresql user=postgres' or postgresql://user@host:5432/db)", describe(.err))]
    BadDsn {
        /// The DSN as given.
        dsn: String,
        /// The parser's complaint (in the message, so not also a `source` that `{:#}` would print again).
        err: postgres::Error,
    },
    /// Connecting or querying failed.
    #[error("{dsn}: {message}")]
    Server {
        /// The DSN without password.
        dsn: String,
        /// What went wrong, with the server's message.
        message: String,
    },
}

/// Removes a password from a DSN for display.
pub fn redact(dsn: &str) -> String {
    if dsn.contains("://") {
        // postgresql://user:secret@host -> postgresql://user:***@host
        if let Some((scheme, rest)) = dsn.split_once("://") {
            if let Some((auth, host)) = rest.split_once('@') {
                if let Some((user, _)) = auth.split_once(':') {
                    return format!("{scheme}://{user}:***@{host}");
                }
            }
        }
        dsn.to_string()
    } else {
        dsn.split_whitespace()
            .map(|w| {
                if w.starts_with("password=") {
                    "password=***"
                } else {
                    w
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[cfg(feature = "pg-client")]
fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {}", db.severity(), db.message());
    }
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg = format!("{msg}: {s}");
        src = s.source();
    }
    msg
}

#[cfg(feature = "pg-client")]
/// Connects to `dsn` read-only and reads the audit's settings. Holding the returned client keeps the
/// backend alive, so the caller can find it in `/proc`.
pub fn query(dsn: &str) -> Result<(ServerInfo, postgres::Client), QueryError> {
    let shown = redact(dsn);
    let mut config: postgres::Config = dsn.parse().map_err(|e| QueryError::BadDsn {
        dsn: shown.clone(),
        err: e,
    })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(std::time::Duration::from_secs(5));
    }
    if config.get_application_name().is_none() {
        config.application_name("preemptlab audit");
    }
    config.options("-c default_transaction_read_only=on");
    let server = |e: postgres::Error| QueryError::Server {
        dsn: shown.clone(),
        message: describe(&e),
    };
    let mut client = match peer_account(&config) {
        Some(account) => osutil::account::as_account(&account, || config.connect(postgres::NoTls))
            .map_err(|e| QueryError::Server {
                dsn: shown.clone(),
                message: format!("connecting as the OS user {}: {e}", account.name),
            })?,
        None => config.connect(postgres::NoTls),
    }
    .map_err(server)?;
    let pid: i32 = client
        .query_one("SELECT pg_backend_pid()", &[])
        .map_err(server)?
        .get(0);
    let names: Vec<String> = SETTINGS.iter().map(|s| s.to_string()).collect();
    let rows = client
        .query(
            "SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1)",
            &[&names],
        )
        .map_err(server)?;
    let mut settings = BTreeMap::new();
    for row in rows {
        let name: String = row.get(0);
        let setting: Option<String> = row.get(1);
        let unit: Option<String> = row.get(2);
        if let Some(setting) = setting {
            settings.insert(name, Setting { setting, unit });
        }
    }
    Ok((
        ServerInfo {
            dsn: shown,
            backend_pid: pid as u32,
            backend_host_pid: None,
            settings,
        },
        client,
    ))
}

#[cfg(feature = "pg-client")]
/// The OS account to connect as so that peer authentication lets `config`'s user in: only as root, only
/// when every host is a unix-socket directory and the user is an OS account other than root.
fn peer_account(config: &postgres::Config) -> Option<osutil::account::Account> {
    if osutil::account::effective_uid() != 0 {
        return None;
    }
    let hosts = config.get_hosts();
    let sockets_only = !hosts.is_empty()
        && hosts
            .iter()
            .all(|h| matches!(h, postgres::config::Host::Unix(_)));
    let user = config.get_user().filter(|u| *u != "root")?;
    if !sockets_only {
        return None;
    }
    // A socket reached through another process's root (`/proc/PID/root/...`: a server in a container, the
    // audit's `socket_dir_from_host`): connect as that server's own user ID. Peer authentication maps it
    // through the container's password database, and only that ID (or root's) may pass through its
    // /proc/PID/root; this host's account of the same name is another ID there.
    let in_root = hosts.iter().find_map(|h| match h {
        postgres::config::Host::Unix(p) => {
            let rest = p.to_str()?.strip_prefix("/proc/")?;
            let (pid, tail) = rest.split_once('/')?;
            (tail == "root" || tail.starts_with("root/")).then(|| pid.parse::<u32>().ok())?
        }
        _ => None,
    });
    match in_root {
        Some(pid) => {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let id = |key: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(key))?
                    .split_whitespace()
                    .nth(1)?
                    .parse::<u32>()
                    .ok()
            };
            Some(osutil::account::Account {
                name: format!("{user} (user ID {} of process {pid})", id("Uid:")?),
                uid: id("Uid:")?,
                gid: id("Gid:")?,
            })
        }
        None => osutil::account::by_name(user),
    }
}

#[cfg(feature = "pg-client")]
/// Open sessions to the `--pg` servers. Keep it alive while reading /proc: the sessions' backends are how
/// servers are matched to local instances.
pub struct Sessions {
    /// What each server returned, in DSN order.
    pub servers: Vec<ServerInfo>,
    _clients: Vec<postgres::Client>,
}

#[cfg(feature = "pg-client")]
/// Queries every DSN (see [`query`]), keeping the sessions open.
pub fn query_all(dsns: &[String]) -> Result<Sessions, QueryError> {
    let mut servers = Vec::new();
    let mut clients = Vec::new();
    for dsn in dsns {
        let (info, client) = query(dsn)?;
        servers.push(info);
        clients.push(client);
    }
    Ok(Sessions {
        servers,
        _clients: clients,
    })
}

#[cfg(feature = "pg-client")]
/// Queries every DSN (see [`query`]), keeping the sessions open; a server that cannot be asked is a
/// [`PgFailure`] beside the others, not the end of the run. Only a DSN that does not parse (bad input) is
/// an error.
pub fn query_each(dsns: &[String]) -> Result<(Sessions, Vec<PgFailure>), QueryError> {
    let mut servers = Vec::new();
    let mut clients = Vec::new();
    let mut failures = Vec::new();
    for dsn in dsns {
        match query(dsn) {
            Ok((info, client)) => {
                servers.push(info);
                clients.push(client);
            }
            Err(e @ QueryError::BadDsn { .. }) => return Err(e),
            Err(QueryError::Server { dsn, message }) => failures.push(PgFailure {
                dsn,
                error: message,
            }),
        }
    }
    Ok((
        Sessions {
            servers,
            _clients: clients,
        },
        failures,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        assert_eq!(
            redact("host=x password=secret user=u"),
            "host=x password=*** user=u"
        );
        assert_eq!(
            redact("postgresql://u:secret@h:5432/db"),
            "postgresql://u:***@h:5432/db"
        );
        assert_eq!(redact("postgresql://u@h/db"), "postgresql://u@h/db");
    }

    #[cfg(feature = "pg-client")]
    #[test]
    fn bad_dsn_is_a_clear_error() {
        match query("host=/tmp port=notaport") {
            Err(QueryError::BadDsn { .. }) => {}
            Err(other) => panic!("expected BadDsn, got {other}"),
            Ok(_) => panic!("expected BadDsn, got a connection"),
        }
    }
}
