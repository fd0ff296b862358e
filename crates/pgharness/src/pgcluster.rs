//! A throwaway PostgreSQL cluster: initdb in a private temporary directory, started as an unprivileged
//! user (as root: `postgres`), listening only on a unix socket in that directory, stopped and removed when
//! dropped. It never touches a cluster it did not create.

use std::ffi::CString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use hostfacts::pgbin::BinDir;

/// Errors of a throwaway cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A step failed; the message names it and carries the tool's stderr.
    #[error("{step}: {detail}")]
    Step {
        /// What was being done.
        step: String,
        /// What went wrong.
        detail: String,
    },
}

fn step(step: impl Into<String>, detail: impl Into<String>) -> ClusterError {
    ClusterError::Step {
        step: step.into(),
        detail: detail.into(),
    }
}

/// The unprivileged account the cluster runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    /// User name (also the database superuser's name).
    pub user: String,
    /// uid.
    pub uid: u32,
    /// gid.
    pub gid: u32,
}

impl RunAs {
    /// As root: the `postgres` account; otherwise the current user.
    pub fn pick() -> Result<RunAs, ClusterError> {
        // SAFETY: geteuid/getegid have no preconditions.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        if uid != 0 {
            let user = std::env::var("USER").unwrap_or_else(|_| format!("uid{uid}"));
            return Ok(RunAs { user, uid, gid });
        }
        let name = CString::new("postgres").expect("no NUL");
        // SAFETY: getpwnam reads the passwd database; the returned pointer is valid until the next call,
        // and we copy the fields out immediately.
        let pw = unsafe { libc::getpwnam(name.as_ptr()) };
        if pw.is_null() {
            return Err(step(
                "finding the postgres user",
                "running as root needs an unprivileged 'postgres' account (apt-get install postgresql-15 creates it)",
            ));
        }
        // SAFETY: pw is non-null and points to a valid passwd struct (see above).
        let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
        Ok(RunAs {
            user: "postgres".into(),
            uid,
            gid,
        })
    }
}

/// A running or stopped throwaway cluster.
#[derive(Debug)]
pub struct Cluster {
    root: PathBuf,
    bin: BinDir,
    run_as: RunAs,
    port: u16,
    running: bool,
    removed: bool,
    /// The postmaster's PID as read once the server was up: the way to stop it when its data directory
    /// (and postmaster.pid with it) has gone from under it.
    postmaster: Option<u32>,
}

impl Cluster {
    /// Runs initdb in a new private directory under `parent` (default: the system temp dir).
    pub fn create(bin: BinDir, parent: Option<&Path>) -> Result<Cluster, ClusterError> {
        let run_as = RunAs::pick()?;
        let parent = parent
            .map(Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir);
        let root = make_private_dir(&parent, &run_as)?;
        let c = Cluster {
            root,
            bin,
            run_as,
            port: 5432,
            running: false,
            removed: false,
            postmaster: None,
        };
        let data = c.data_dir();
        let out = c
            .command("initdb")
            .arg("-D")
            .arg(&data)
            .args([
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
                "-U",
            ])
            .arg(&c.run_as.user)
            .output()
            .map_err(|e| step("running initdb", e.to_string()))?;
        check(&out, "initdb")?;
        Ok(c)
    }

    /// The directory holding everything (data, socket, log).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    /// The unix-socket directory.
    pub fn socket_dir(&self) -> PathBuf {
        self.root.clone()
    }

    /// The port (names the socket file; there is no TCP listener).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The account the server runs as.
    pub fn run_as(&self) -> &RunAs {
        &self.run_as
    }

    /// The binaries used.
    pub fn bin(&self) -> &BinDir {
        &self.bin
    }

    /// A libpq connection string for this cluster.
    pub fn dsn(&self, dbname: &str) -> String {
        format!(
            "host={} port={} user={} dbname={dbname}",
            self.socket_dir().display(),
            self.port,
            self.run_as.user
        )
    }

    /// A command for one of PostgreSQL's binaries, run as the cluster's user.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin.dir.join(program));
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            cmd.uid(self.run_as.uid).gid(self.run_as.gid);
            cmd.env("HOME", &self.root).env("USER", &self.run_as.user);
        }
        cmd.current_dir(&self.root);
        // Its own process group: a hang-up or Ctrl-C meant for the bench (sent to the terminal's foreground
        // group) must not kill initdb or pg_ctl halfway, which leaves PostgreSQL's shared memory segments
        // behind; the bench sees the signal, lets the step finish, and removes the cluster.
        cmd.process_group(0);
        cmd
    }

    /// Starts the server with `settings` passed as `-c name=value`; waits until it accepts connections.
    pub fn start(&mut self, settings: &[(String, String)]) -> Result<(), ClusterError> {
        let mut opts = format!(
            "-c listen_addresses='' -c unix_socket_directories='{}' -c port={}",
            self.socket_dir().display(),
            self.port
        );
        // pg_ctl hands these options to the shell: each `name=value` is single-quoted, so a value such as
        // `1; DROP` reaches the server as a value (which it refuses) and never the shell as a command.
        for (k, v) in settings {
            opts.push_str(&format!(" -c {}", shell_quote(&format!("{k}={v}"))));
        }
        let log = self.root.join("server.log");
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(&log)
            .args(["-w", "-t", "120", "-o", &opts, "start"])
            .output()
            .map_err(|e| step("running pg_ctl start", e.to_string()))?;
        if !out.status.success() {
            let log_text = fs::read_to_string(&log).unwrap_or_default();
            let detail = server_failure_cause(&log_text).unwrap_or_else(|| {
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect::<Vec<_>>()
                    .join("; ")
            });
            return Err(step("starting the throwaway server", detail));
        }
        self.running = true;
        self.postmaster = self.postmaster_pid();
        Ok(())
    }

    /// A runtime-computed setting (`postgres -C NAME`, PG 15+ for the shared-memory sizes) for the stopped
    /// cluster with `settings` applied.
    pub fn computed(
        &self,
        name: &str,
        settings: &[(String, String)],
    ) -> Result<String, ClusterError> {
        let mut cmd = self.command("postgres");
        cmd.arg("-D").arg(self.data_dir());
        for (k, v) in settings {
            cmd.arg("-c").arg(format!("{k}={v}"));
        }
        let out = cmd
            .arg("-C")
            .arg(name)
            .output()
            .map_err(|e| step("running postgres -C", e.to_string()))?;
        check(&out, &format!("postgres -C {name}"))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Runs `sql` with psql in `db` (stops at the first error); returns psql's unaligned, tuples-only output.
    pub fn psql(&self, db: &str, sql: &str) -> Result<String, ClusterError> {
        let out = self
            .command("psql")
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(self.socket_dir())
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-U")
            .arg(&self.run_as.user)
            .arg("-d")
            .arg(db)
            .arg("-c")
            .arg(sql)
            .output()
            .map_err(|e| step("running psql", e.to_string()))?;
        check(&out, &format!("psql: {sql}"))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// The server log's last `n` lines.
    pub fn log_tail(&self, n: usize) -> String {
        let text = fs::read_to_string(self.root.join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// True while the server started by [`Cluster::start`] has not been stopped.
    pub fn is_running(&self) -> bool {
        self.running
    }

    /// The postmaster's PID, from postmaster.pid.
    pub fn postmaster_pid(&self) -> Option<u32> {
        fs::read_to_string(self.data_dir().join("postmaster.pid"))
            .ok()
            .and_then(|t| hostfacts::parse::postmaster_pid(&t).pid)
    }

    /// Stops the server (fast shutdown); a no-op when it is not running.
    pub fn stop(&mut self) -> Result<(), ClusterError> {
        if !self.running {
            return Ok(());
        }
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-w", "-t", "60", "-m", "fast", "stop"])
            .output()
            .map_err(|e| step("running pg_ctl stop", e.to_string()))?;
        self.running = false;
        check(&out, "pg_ctl stop")
    }

    /// Stops the server and removes the directory.
    pub fn remove(mut self) -> Result<(), ClusterError> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), ClusterError> {
        if self.removed {
            return Ok(());
        }
        let mut stopped = self.stop();
        if stopped.is_err() {
            // Last resort: immediate shutdown by signal, then wait for the postmaster to go. Its PID comes from
            // postmaster.pid, else from the one remembered at start (the directory may be gone), and only
            // while that process is still this cluster's postmaster: a PID can be reused.
            let pid = self
                .postmaster_pid()
                .or(self.postmaster)
                .filter(|&pid| self.is_our_postmaster(pid));
            if let Some(pid) = pid {
                // SAFETY: kill with a PID that runs this cluster's own postmaster (checked just above).
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGQUIT) };
                let t = Instant::now();
                while t.elapsed() < Duration::from_secs(10) && crate::procsample::alive(pid) {
                    std::thread::sleep(Duration::from_millis(50));
                }
                // Stopped after all: the cluster is gone as asked, and pg_ctl's failure was only the way.
                if !crate::procsample::alive(pid) {
                    stopped = Ok(());
                }
            }
        }
        match fs::remove_dir_all(&self.root) {
            Ok(()) => {}
            // Already gone (removed under us): nothing left to remove.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(step(
                    format!("removing {}", self.root.display()),
                    e.to_string(),
                ))
            }
        }
        self.removed = true;
        stopped
    }

    /// Whether `pid` runs a postgres whose command line names this cluster's data directory.
    fn is_our_postmaster(&self, pid: u32) -> bool {
        let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
            return false;
        };
        let data = self.data_dir();
        let data = data.as_os_str().as_encoded_bytes();
        let mut args = cmdline.split(|&b| b == 0);
        let is_postgres = args.next().is_some_and(|exe| exe.ends_with(b"postgres"));
        is_postgres && args.any(|a| a == data)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            osutil::msg!("preemptlab: cleaning up the throwaway cluster: {e}");
        }
    }
}

/// `s` single-quoted for the shell (a `'` inside becomes `'\''`).
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The server's own reason for not starting, from its log: the first FATAL (or PANIC/ERROR) message, without
/// the timestamp and pid prefix, e.g. `unrecognized configuration parameter "nosuch_guc"`.
fn server_failure_cause(log: &str) -> Option<String> {
    ["FATAL:", "PANIC:", "ERROR:"].iter().find_map(|level| {
        log.lines()
            .find_map(|l| l.split_once(level))
            .map(|(_, msg)| msg.trim().to_string())
    })
}

fn check(out: &Output, what: &str) -> Result<(), ClusterError> {
    if out.status.success() {
        Ok(())
    } else {
        Err(step(
            what,
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stderr).trim(),
                String::from_utf8_lossy(&out.stdout).trim()
            ),
        ))
    }
}

fn make_private_dir(parent: &Path, run_as: &RunAs) -> Result<PathBuf, ClusterError> {
    for attempt in 0..100u32 {
        let name = format!("preemptlab-pg-{}-{}", std::process::id(), attempt);
        let dir = parent.join(name);
        match fs::create_dir(&dir) {
            Ok(()) => {
                fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
                    .map_err(|e| step("chmod the cluster dir", e.to_string()))?;
                let c = CString::new(dir.as_os_str().to_string_lossy().as_bytes())
                    .map_err(|e| step("cluster dir path", e.to_string()))?;
                // SAFETY: chown on a path we just created; c is a valid NUL-terminated string.
                if unsafe { libc::chown(c.as_ptr(), run_as.uid, run_as.gid) } != 0 {
                    let e = std::io::Error::last_os_error();
                    let _ = fs::remove_dir(&dir);
                    return Err(step(
                        format!("chown {} to {}", dir.display(), run_as.user),
                        e.to_string(),
                    ));
                }
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(step(
                    format!("creating a directory in {}", parent.display()),
                    e.to_string(),
                ))
            }
        }
    }
    Err(step("creating the cluster dir", "100 names taken"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_settings_reach_the_shell_quoted_and_failures_name_their_cause() {
        assert_eq!(shell_quote("work_mem=1; DROP"), "'work_mem=1; DROP'");
        assert_eq!(shell_quote("a='b'"), r"'a='\''b'\'''");
        let log = "2026-11-22 23:35:59.891 GMT [22637] LOG:  starting\n\
                   2026-11-22 23:35:59.891 GMT [22637] FATAL:  unrecognized configuration parameter \"nosuch_guc\"\n";
        assert_eq!(
            server_failure_cause(log).as_deref(),
            Some("unrecognized configuration parameter \"nosuch_guc\"")
        );
        assert_eq!(server_failure_cause("LOG:  fine\n"), None);
    }
}
