//! A pgbouncer in front of a throwaway cluster, as in the page-table OOM case (docs/references.md#page-table-cost): session pooling with persistent server
//! connections (`min_pool_size`, a long `server_lifetime`), listening only on a unix socket in the cluster's
//! private directory, run as the cluster's user, stopped on drop.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::pgcluster::Cluster;

/// Finds the pgbouncer binary (PATH, then Debian's /usr/sbin).
pub fn find() -> Result<PathBuf, String> {
    crate::which("pgbouncer", &["/usr/sbin"]).ok_or_else(|| {
        "--pooler pgbouncer: no pgbouncer binary; apt-get install pgbouncer".to_string()
    })
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
    ) -> Result<PgBouncer, String> {
        let dir = cluster.socket_dir();
        let ini = dir.join("pgbouncer.ini");
        let text = format!(
            "[databases]\n* = host={sock} port={pgport} user={user}\n\n[pgbouncer]\nlisten_addr =\nlisten_port = {port}\nunix_socket_dir = {sock}\nauth_type = any\npool_mode = session\ndefault_pool_size = {pool_size}\nmin_pool_size = {pool_size}\nmax_client_conn = {max}\nserver_lifetime = 86400\nserver_idle_timeout = 0\nlogfile = {sock}/pgbouncer.log\npidfile = {sock}/pgbouncer.pid\n",
            sock = dir.display(),
            pgport = cluster.port(),
            user = cluster.run_as().user,
            max = pool_size.saturating_mul(4).max(100),
        );
        std::fs::write(&ini, text).map_err(|e| format!("writing {}: {e}", ini.display()))?;
        let mut cmd = Command::new(bin);
        if hostfacts::host::is_root() {
            let r = cluster.run_as();
            cmd.uid(r.uid).gid(r.gid);
            let c = std::ffi::CString::new(ini.as_os_str().to_string_lossy().as_bytes())
                .map_err(|e| e.to_string())?;
            // SAFETY: chown of a file we just wrote in our private directory; `c` is NUL-terminated
            // and outlives the call.
            unsafe { libc::chown(c.as_ptr(), r.uid, r.gid) };
        }
        let out = cmd
            .arg("-d")
            .arg(&ini)
            .current_dir(&dir)
            .output()
            .map_err(|e| format!("running {}: {e}", bin.display()))?;
        let mut me = PgBouncer {
            dir: dir.clone(),
            port,
            pid: None,
        };
        let log = || std::fs::read_to_string(dir.join("pgbouncer.log")).unwrap_or_default();
        if !out.status.success() {
            return Err(format!(
                "pgbouncer did not start: {}{}",
                String::from_utf8_lossy(&out.stderr).trim(),
                log()
            ));
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
        Err(format!(
            "pgbouncer did not open {} within 10 s: {}",
            socket.display(),
            log()
        ))
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
