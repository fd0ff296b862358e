//! A pgbouncer in front of a throwaway cluster, as in the page-table OOM case (docs/references.md#page-table-cost): session pooling with persistent server
//! connections (`min_pool_size`, a long `server_lifetime`), listening only on a unix socket in the cluster's
//! private directory, run as the cluster's user, stopped on drop.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::pgcluster::Cluster;

/// Why pgbouncer is not there or did not start.
#[derive(Debug, thiserror::Error)]
pub enum PgBouncerError {
    /// No binary on PATH or in /usr/sbin.
    #[error("no pgbouncer binary; apt-get install pgbouncer")]
    NotFound,
    /// Its configuration file could not be written.
    #[error("writing {}: {err}", .path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// What the write said.
        err: std::io::Error,
    },
    /// It could not be run.
    #[error("running {}: {err}", .bin.display())]
    Run {
        /// The binary.
        bin: PathBuf,
        /// What starting it said.
        err: std::io::Error,
    },
    /// It exited with an error instead of going into the background.
    #[error("pgbouncer did not start: {output}")]
    Failed {
        /// Its stderr and log.
        output: String,
    },
    /// It started but its socket did not appear.
    #[error("pgbouncer did not open {} within 10 s: {log}", .socket.display())]
    NoSocket {
        /// The socket it should have opened.
        socket: PathBuf,
        /// Its log.
        log: String,
    },
}

/// Finds the pgbouncer binary (PATH, then Debian's /usr/sbin).
pub fn find() -> Result<PathBuf, PgBouncerError> {
    osutil::which("pgbouncer", &["/usr/sbin"]).ok_or(PgBouncerError::NotFound)
}

/// A running pgbouncer.
#[derive(Debug)]
pub struct PgBouncer {
    dir: PathBuf,
    port: u16,
    pid: Option<i32>,
}

impl PgBouncer {
    /// Starts pgbouncer on `port` (the unix socket `.s.PGSQL.<port>` in the cluster's directory) with
    /// `pool_size` server connections per database kept open.
    pub fn start(
        bin: &Path,
        cluster: &Cluster,
        port: u16,
        pool_size: u32,
    ) -> Result<PgBouncer, PgBouncerError> {
        let dir = cluster.socket_dir();
        let ini = dir.join("pgbouncer.ini");
        let text = format!(
            "[databases]\n* = host={sock} port={pgport} user={user}\n\n[pgbouncer]\nlisten_addr =\nlisten_port = {port}\nunix_socket_dir = {sock}\nauth_type = any\npool_mode = session\ndefault_pool_size = {pool_size}\nmin_pool_size = {pool_size}\nmax_client_conn = {max}\nserver_lifetime = 86400\nserver_idle_timeout = 0\nlogfile = {sock}/pgbouncer.log\npidfile = {sock}/pgbouncer.pid\n",
            sock = dir.display(),
            pgport = cluster.port(),
            user = cluster.run_as().user,
            max = pool_size.saturating_mul(4).max(100),
        );
        let config = |err| PgBouncerError::Config {
            path: ini.clone(),
            err,
        };
        std::fs::write(&ini, text).map_err(config)?;
        let mut cmd = Command::new(bin);
        if osutil::is_root() {
            let r = cluster.run_as();
            cmd.uid(r.uid).gid(r.gid);
            let c = std::ffi::CString::new(ini.as_os_str().to_string_lossy().as_bytes())
                .map_err(|e| config(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)))?;
            // SAFETY: chown of a file we just wrote in our private directory; `c` is NUL-terminated
            // and outlives the call.
            unsafe { libc::chown(c.as_ptr(), r.uid, r.gid) };
        }
        let out = cmd
            .arg("-d")
            .arg(&ini)
            .current_dir(&dir)
            .output()
            .map_err(|err| PgBouncerError::Run {
                bin: bin.to_path_buf(),
                err,
            })?;
        let mut me = PgBouncer {
            dir: dir.clone(),
            port,
            pid: None,
        };
        let log = || std::fs::read_to_string(dir.join("pgbouncer.log")).unwrap_or_default();
        if !out.status.success() {
            return Err(PgBouncerError::Failed {
                output: format!("{}{}", String::from_utf8_lossy(&out.stderr).trim(), log()),
            });
        }
        let socket = dir.join(format!(".s.PGSQL.{port}"));
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            me.pid = std::fs::read_to_string(dir.join("pgbouncer.pid"))
                .ok()
                .and_then(|p| p.trim().parse().ok());
            if me.pid.is_some() && socket.exists() {
                return Ok(me);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(PgBouncerError::NoSocket { socket, log: log() })
    }

    /// The port its socket is named after.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory holding its socket.
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    /// Stops it (immediate shutdown) and waits for the process to go.
    pub fn stop(&mut self) {
        let Some(pid) = self.pid.take() else { return };
        // SAFETY: signalling the pgbouncer we started (PID from its own pidfile in our directory).
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let t = Instant::now();
        while crate::procsample::alive(pid as u32) && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if crate::procsample::alive(pid as u32) {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        self.stop();
    }
}
