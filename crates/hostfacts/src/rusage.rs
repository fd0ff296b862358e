//! The one `getrusage(2)` wrapper of the workspace: CPU time and the counters the benches report, for the
//! process (`RUSAGE_SELF`), the calling thread (`RUSAGE_THREAD`) or the reaped children
//! (`RUSAGE_CHILDREN`, what `vm` counts as the guest's CPU).

/// Whose usage to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// The whole process (a forked worker).
    Process,
    /// The calling thread (a thread worker).
    Thread,
    /// The children this process has waited for, and theirs.
    Children,
}

/// One reading of `getrusage`: CPU time in ns, minor faults and context switches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// User CPU time.
    pub user_ns: u64,
    /// System CPU time.
    pub sys_ns: u64,
    /// Minor page faults.
    pub minflt: u64,
    /// Voluntary context switches.
    pub nvcsw: u64,
    /// Involuntary context switches.
    pub nivcsw: u64,
}

impl Usage {
    /// Reads the usage of `who` now.
    pub fn now(who: Who) -> Self {
        let who = match who {
            Who::Process => libc::RUSAGE_SELF,
            Who::Thread => libc::RUSAGE_THREAD,
            Who::Children => libc::RUSAGE_CHILDREN,
        };
        let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage writes a rusage into the pointer we pass; RUSAGE_SELF, RUSAGE_THREAD and
        // RUSAGE_CHILDREN are valid targets on Linux, so it cannot fail.
        unsafe { libc::getrusage(who, ru.as_mut_ptr()) };
        // SAFETY: zero bytes are a valid rusage, and the kernel has filled it since.
        let ru = unsafe { ru.assume_init() };
        let tv_ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1000;
        Self {
            user_ns: tv_ns(ru.ru_utime),
            sys_ns: tv_ns(ru.ru_stime),
            minflt: ru.ru_minflt as u64,
            nvcsw: ru.ru_nvcsw as u64,
            nivcsw: ru.ru_nivcsw as u64,
        }
    }

    /// The usage between `earlier` and this reading (saturating at 0).
    pub fn since(self, earlier: Self) -> Self {
        Self {
            user_ns: self.user_ns.saturating_sub(earlier.user_ns),
            sys_ns: self.sys_ns.saturating_sub(earlier.sys_ns),
            minflt: self.minflt.saturating_sub(earlier.minflt),
            nvcsw: self.nvcsw.saturating_sub(earlier.nvcsw),
            nivcsw: self.nivcsw.saturating_sub(earlier.nivcsw),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Usage, Who};

    #[test]
    fn usage_grows_with_work() {
        let a = Usage::now(Who::Thread);
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        let d = Usage::now(Who::Thread).since(a);
        assert!(d.user_ns + d.sys_ns > 0, "{d:?}");
        // The process's time holds the thread's, but only in total: the kernel splits each one's runtime into
        // user and system by its own tick samples, so the process's user time can be below a thread's.
        let p = Usage::now(Who::Process);
        assert!(p.user_ns + p.sys_ns >= d.user_ns + d.sys_ns, "{p:?} {d:?}");
    }
}
