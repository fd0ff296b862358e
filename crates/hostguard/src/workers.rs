//! One fork helper for every place that forks a worker process (`lab`'s benches): fork with the child set up to die
//! with the parent and leave SIGINT to it, non-blocking and bounded reaping, and SIGKILL + reap of whatever
//! is still running when the set is dropped (so no exit path leaves a worker behind).
//!
//! The lab forks from its main thread while no other thread holds a lock (progress is drawn from the main
//! thread). Reaping never takes a child that is not in the set, so a `std::process::Command` elsewhere in
//! the process keeps its own.

use std::collections::HashMap;
use std::ffi::CStr;
use std::time::{Duration, Instant};

/// How a forked child ended.
#[derive(Debug, Clone, Copy)]
pub struct Exit {
    /// Its pid.
    pub pid: libc::pid_t,
    /// The raw `waitpid` status.
    pub status: libc::c_int,
}

impl Exit {
    /// Exited with status 0.
    pub fn success(&self) -> bool {
        libc::WIFEXITED(self.status) && libc::WEXITSTATUS(self.status) == 0
    }
}

/// Forked children, each with a tag `T` (e.g. its worker slot). Dropping the set kills and reaps the
/// children still in it.
pub struct Children<T> {
    running: HashMap<libc::pid_t, T>,
}

impl<T> Default for Children<T> {
    fn default() -> Self {
        Self {
            running: HashMap::new(),
        }
    }
}

impl<T> Children<T> {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Children still running (not yet reaped).
    pub fn len(&self) -> usize {
        self.running.len()
    }

    /// No child running.
    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Forks a child named `name` (`PR_SET_NAME`, as `ps` shows it) that runs `body` and `_exit`s with its
    /// return value (101 if it panics). The child dies with the parent (`PR_SET_PDEATHSIG`), ignores
    /// SIGINT (the parent stops it through shared memory or by killing it) and takes SIGTERM's default
    /// action. It never returns into the parent's code and runs no destructors or atexit handlers.
    ///
    /// The caller must fork from a process whose other threads hold no locks the child could need (the lab
    /// forks from its single main thread; glibc's fork keeps malloc usable in the child).
    pub fn spawn(
        &mut self,
        tag: T,
        name: &CStr,
        body: impl FnOnce() -> i32,
    ) -> std::io::Result<libc::pid_t> {
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the documented precondition (no other thread holds a lock the child needs) is the
        // caller's; the child only runs `body` and _exits.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if pid > 0 {
            self.running.insert(pid, tag);
            return Ok(pid);
        }
        // Child. Die with the parent; leave SIGINT to the parent.
        // SAFETY: prctl/signal with constant arguments and a NUL-terminated name that outlives the call;
        // getppid has no preconditions; _exit never returns.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            if libc::getppid() != parent {
                libc::_exit(9);
            }
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0);
        }
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(101);
        // SAFETY: leave without running the parent's atexit handlers or destructors.
        unsafe { libc::_exit(code) }
    }

    /// Reaps one child of the set that has ended, without blocking: its tag and how it ended. None when
    /// none has.
    pub fn try_reap(&mut self) -> Option<(T, Exit)> {
        match self.poll() {
            Poll::Ended(tag, e) => Some((tag, e)),
            Poll::Running | Poll::NoChildren => None,
        }
    }

    /// Waits for every child, calling `ended` for each; kills the ones still running after `timeout`, or
    /// 2 s after an interrupt (`osutil::stop::interrupted()`). Returns how many were killed.
    pub fn reap_all(&mut self, timeout: Duration, mut ended: impl FnMut(T, Exit)) -> usize {
        let t = Instant::now();
        while !self.running.is_empty() {
            match self.poll() {
                Poll::Ended(tag, e) => {
                    ended(tag, e);
                    continue;
                }
                Poll::NoChildren => {
                    self.running.clear();
                    break;
                }
                Poll::Running => {}
            }
            if t.elapsed() > timeout
                || (osutil::stop::interrupted() && t.elapsed() > Duration::from_secs(2))
            {
                let n = self.running.len();
                self.kill_all();
                return n;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        0
    }

    /// One non-blocking look for an ended child of the set. Peeks at any ended child of the process
    /// (`waitid(P_ALL, WNOWAIT)`, one system call whatever the size of the set) and reaps it only if it is
    /// ours; when the ended child is someone else's (a `Command` of another thread), asks each of ours in
    /// turn, so a foreign zombie never hides ours and is left for its owner to reap.
    fn poll(&mut self) -> Poll<T> {
        // SAFETY: siginfo_t is plain data for which all-zero bytes are a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid writes a siginfo_t into the pointer we pass; WNOWAIT leaves the child unreaped.
        let r = unsafe {
            libc::waitid(
                libc::P_ALL,
                0,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        if r < 0 {
            return Poll::NoChildren;
        }
        // SAFETY: waitid filled a SIGCHLD siginfo (or left it zeroed: pid 0, nobody ended).
        let pid = unsafe { info.si_pid() };
        let candidates: Vec<libc::pid_t> = if pid == 0 {
            return Poll::Running;
        } else if self.running.contains_key(&pid) {
            vec![pid]
        } else {
            self.running.keys().copied().collect()
        };
        for p in candidates {
            let mut status = 0;
            // SAFETY: reaping our own child (in the set, so not reaped yet) without blocking.
            if unsafe { libc::waitpid(p, &mut status, libc::WNOHANG) } == p {
                if let Some(tag) = self.running.remove(&p) {
                    return Poll::Ended(tag, Exit { pid: p, status });
                }
            }
        }
        Poll::Running
    }

    /// SIGKILLs and reaps every child still in the set.
    fn kill_all(&mut self) {
        for &p in self.running.keys() {
            // SAFETY: killing our own child (not yet reaped, so the pid is still ours).
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        for &p in self.running.keys() {
            let mut st = 0;
            // SAFETY: reaping our own child.
            unsafe { libc::waitpid(p, &mut st, 0) };
        }
        self.running.clear();
    }
}

/// What [`Children::poll`] found.
enum Poll<T> {
    Ended(T, Exit),
    Running,
    NoChildren,
}

impl<T> Drop for Children<T> {
    fn drop(&mut self) {
        self.kill_all();
    }
}

#[cfg(test)]
mod tests {
    use super::Children;
    use std::time::Duration;

    #[test]
    fn children_report_their_exit_and_are_killed_on_drop() {
        let mut c = Children::new();
        c.spawn(1u32, c"plab-test", || 0).unwrap();
        c.spawn(2u32, c"plab-test", || 3).unwrap();
        let mut seen = Vec::new();
        let killed = c.reap_all(Duration::from_secs(10), |tag, e| {
            seen.push((tag, e.success()))
        });
        seen.sort();
        assert_eq!((killed, seen), (0, vec![(1, true), (2, false)]));

        let mut c = Children::new();
        let pid = c
            .spawn((), c"plab-test", || {
                std::thread::sleep(Duration::from_secs(60));
                0
            })
            .unwrap();
        drop(c);
        // SAFETY: probing a pid with signal 0; it was reaped, so it no longer exists as our child.
        assert_eq!(unsafe { libc::kill(pid, 0) }, -1);
    }
}
