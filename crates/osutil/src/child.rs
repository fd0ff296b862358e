//! The one child-process helper of the benches (pgbench, sysbench, a latency load): the child runs in its
//! own process group, so a terminal's Ctrl-C reaches preemptlab alone and preemptlab stops the child
//! itself; the parent polls the stop flag ([`stop::interrupted`]: SIGINT, SIGTERM, SIGHUP, SIGQUIT) and
//! stops the group with SIGINT, then SIGKILL after a grace period; dropping a [`Child`] does the same, so
//! no exit path leaves one behind. [`crate::tail`] keeps the last lines of its output for error messages.

use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::stop;

/// Errors of a child process.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// It could not be started.
    #[error("starting {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// Waiting for it failed.
    #[error("waiting for {program}: {source}")]
    Wait {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// It ran past its time limit and was stopped.
    #[error("{program} was still running {limit_s} s after its end; killed")]
    Overran {
        /// The program.
        program: String,
        /// The limit, s.
        limit_s: u64,
    },
}

/// How a wait ended.
#[derive(Debug)]
pub enum Ended {
    /// The child exited by itself.
    Exited(ExitStatus),
    /// The stop flag was set; the child was stopped.
    Interrupted,
}

/// A child process in its own process group, stopped (SIGINT, then SIGKILL after `grace`) when dropped.
pub struct Child {
    inner: Option<std::process::Child>,
    program: String,
    grace: Duration,
}

impl Child {
    /// Starts `cmd` in its own process group with stdin from /dev/null and the given stdout and stderr.
    /// `grace` is how long a stop waits after SIGINT before SIGKILL.
    pub fn spawn(
        cmd: &mut Command,
        stdout: Stdio,
        stderr: Stdio,
        grace: Duration,
    ) -> Result<Self, ChildError> {
        let program = cmd.get_program().to_string_lossy().into_owned();
        cmd.stdout(stdout)
            .stderr(stderr)
            .stdin(Stdio::null())
            .process_group(0);
        let inner = cmd.spawn().map_err(|source| ChildError::Spawn {
            program: program.clone(),
            source,
        })?;
        Ok(Self {
            inner: Some(inner),
            program,
            grace,
        })
    }

    /// The program's name as given to the command.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// Its exit status if it has exited; None while it runs (or when waiting fails).
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.inner.as_mut()?.try_wait().ok().flatten()
    }

    /// Waits for it to exit, calling `tick` about every `every`. Stops it and returns
    /// [`Ended::Interrupted`] when the stop flag is set, and stops it with [`ChildError::Overran`] once
    /// `limit` has passed.
    pub fn wait(
        &mut self,
        limit: Duration,
        every: Duration,
        mut tick: impl FnMut(),
    ) -> Result<Ended, ChildError> {
        let t = Instant::now();
        let mut last = Instant::now();
        loop {
            let c = self.inner.as_mut().expect("a child not yet stopped");
            if let Some(st) = c.try_wait().map_err(|source| ChildError::Wait {
                program: self.program.clone(),
                source,
            })? {
                self.inner = None;
                return Ok(Ended::Exited(st));
            }
            if stop::interrupted() {
                self.stop();
                return Ok(Ended::Interrupted);
            }
            if t.elapsed() > limit {
                self.stop();
                return Err(ChildError::Overran {
                    program: self.program.clone(),
                    limit_s: limit.as_secs(),
                });
            }
            if last.elapsed() > every {
                last = Instant::now();
                tick();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the child's process group: SIGINT (a driver reports and exits; a `bench lock` load cleans
    /// up), then SIGKILL if it still runs after the grace period; reaps it.
    pub fn stop(&mut self) {
        let Some(mut c) = self.inner.take() else {
            return;
        };
        let pg = c.id() as libc::pid_t;
        // SAFETY: signalling the process group we created (the child is not reaped yet, so the group id
        // is still ours).
        unsafe { libc::kill(-pg, libc::SIGINT) };
        let t = Instant::now();
        while t.elapsed() < self.grace {
            if let Ok(Some(_)) = c.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: as above; harmless when the group is gone. Children that stayed in the group go too.
        unsafe { libc::kill(-pg, libc::SIGKILL) };
        let _ = c.wait();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::{Child, Ended};
    use std::process::{Command, Stdio};
    use std::time::Duration;

    #[test]
    fn a_child_exits_and_a_dropped_one_is_stopped() {
        let mut c = Child::spawn(
            Command::new("sh").args(["-c", "exit 3"]),
            Stdio::null(),
            Stdio::null(),
            Duration::from_secs(1),
        )
        .unwrap();
        match c.wait(Duration::from_secs(10), Duration::from_secs(1), || {}) {
            Ok(Ended::Exited(st)) => assert_eq!(st.code(), Some(3)),
            other => panic!("{other:?}"),
        }
        let c = Child::spawn(
            Command::new("sleep").arg("60"),
            Stdio::null(),
            Stdio::null(),
            Duration::from_secs(1),
        )
        .unwrap();
        let t = std::time::Instant::now();
        drop(c);
        assert!(t.elapsed() < Duration::from_secs(5));
        assert!(Child::spawn(
            &mut Command::new("/nonexistent/x"),
            Stdio::null(),
            Stdio::null(),
            Duration::ZERO
        )
        .is_err());
    }
}
