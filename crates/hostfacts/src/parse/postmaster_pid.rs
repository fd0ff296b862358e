//! PostgreSQL's `postmaster.pid` (`src/include/utils/pidfile.h`).

/// The fields of PostgreSQL's `postmaster.pid` (pidfile.h: pid, data dir, start time, port, socket dir,
/// listen address, shmem key, status).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PostmasterPid {
    /// Line 1: the postmaster's PID.
    pub pid: Option<u32>,
    /// Line 2: the data directory.
    pub data_dir: Option<String>,
    /// Line 4: the port.
    pub port: Option<u16>,
    /// Line 5: the first unix-socket directory.
    pub socket_dir: Option<String>,
    /// Line 8: the status (`ready`, `starting`, `stopping`).
    pub status: Option<String>,
}

/// Parses `postmaster.pid`.
pub fn postmaster_pid(text: &str) -> PostmasterPid {
    let lines: Vec<&str> = text.lines().collect();
    let get = |i: usize| lines.get(i).map(|s| s.trim()).filter(|s| !s.is_empty());
    PostmasterPid {
        pid: get(0).and_then(|s| s.parse().ok()),
        data_dir: get(1).map(str::to_string),
        port: get(3).and_then(|s| s.parse().ok()),
        socket_dir: get(4).map(str::to_string),
        status: get(7).map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postmaster_pid_file() {
        let p = postmaster_pid("4357\n/var/lib/postgresql/15/main\n1700000000\n5432\n/var/run/postgresql\nlocalhost\n  5432001         0\nready   \n");
        assert_eq!(p.pid, Some(4357));
        assert_eq!(p.data_dir.as_deref(), Some("/var/lib/postgresql/15/main"));
        assert_eq!(p.port, Some(5432));
        assert_eq!(p.socket_dir.as_deref(), Some("/var/run/postgresql"));
        assert_eq!(p.status.as_deref(), Some("ready"));
        assert_eq!(postmaster_pid(""), PostmasterPid::default());
    }
}
