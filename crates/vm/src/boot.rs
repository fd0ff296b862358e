//! One boot of the guest: virtme-ng started in its own process group, waited for, timed against the host's
//! load, and stopped with its whole group on every path ([`Group`]).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hostfacts::rusage::{Usage, Who};
use results::vm::VcpuTime;

use crate::run::{host_cpus, tail, VmOptions};
use crate::{vcpus, VmError};

/// Kills a process group on drop (SIGTERM, up to 3 s, SIGKILL) and reaps its leader.
struct Group {
    child: Child,
    done: bool,
}

impl Group {
    fn pgid(&self) -> libc::pid_t {
        self.child.id() as libc::pid_t
    }

    fn stop(&mut self) {
        let pg = self.pgid();
        // SAFETY: signalling the process group we created (its id is our child's pid, which we have not
        // reaped while the group may still exist).
        unsafe { libc::kill(-pg, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if self.group_gone() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: as above.
        unsafe { libc::kill(-pg, libc::SIGKILL) };
        let _ = self.child.wait();
        self.done = true;
    }

    /// True when no process of the group is left (the leader may be a zombie until reaped).
    fn group_gone(&mut self) -> bool {
        let _ = self.child.try_wait();
        // SAFETY: signal 0 only checks for existence.
        let r = unsafe { libc::kill(-self.pgid(), 0) };
        r != 0
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !self.done {
            self.stop();
        } else {
            // The leader exited; QEMU may not have (it is in the same group).
            // SAFETY: as in stop(); the group id stays reserved while any member lives.
            unsafe { libc::kill(-self.pgid(), libc::SIGKILL) };
        }
    }
}

/// The host's CPU time so far: all CPUs' busy time (/proc/stat) and what this process and its reaped
/// children (virtme-ng, and QEMU under it) used, ns.
#[derive(Debug, Clone, Copy)]
struct HostLoad {
    busy_ns: u64,
    ours_ns: u64,
}

impl HostLoad {
    fn now() -> Option<Self> {
        let t = osutil::procstat::now()?;
        // SAFETY: sysconf only reads a configuration value.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if hz <= 0 {
            return None;
        }
        let jiffies = t.total.checked_sub(t.idle)?.checked_sub(t.steal)?;
        Some(Self {
            busy_ns: jiffies.checked_mul(1_000_000_000)? / hz as u64,
            ours_ns: [Who::Process, Who::Children]
                .map(|w| {
                    let u = Usage::now(w);
                    u.user_ns + u.sys_ns
                })
                .iter()
                .sum(),
        })
    }

    /// The share of the host's CPU capacity that processes other than the guest (and this one) used
    /// since `self`, over `wall`, %: a guest's vCPUs are host threads, so a busy host slows the guest
    /// unevenly and its results with it. None when unreadable.
    fn others_pct(self, wall: Duration) -> Option<f64> {
        let later = Self::now()?;
        let busy = later.busy_ns.checked_sub(self.busy_ns)? as f64;
        let ours = later.ours_ns.checked_sub(self.ours_ns)? as f64;
        let capacity = wall.as_nanos() as f64 * f64::from(host_cpus());
        (capacity > 0.0).then(|| ((busy - ours).max(0.0) / capacity * 100.0).min(100.0))
    }
}

/// One boot of the guest, waited for until virtme-ng exits.
pub(crate) struct Attempt {
    /// From starting virtme-ng until the command started; None when it never did.
    pub(crate) boot: Option<Duration>,
    /// From starting virtme-ng until it exited.
    pub(crate) wall: Duration,
    /// [`HostLoad::others_pct`] over the boot.
    pub(crate) host_other_busy_pct: Option<f64>,
    /// From the command's start to its end (`started` to `status` in the shared directory).
    pub(crate) command: Option<Duration>,
    /// The vCPU threads' run and wait over that window ([`vcpus`]).
    pub(crate) vcpu_times: Vec<VcpuTime>,
}

/// Starts virtme-ng (its output to `log_path`, truncated) and waits for it to exit: stops its whole
/// process group on a stop signal ([`VmError::Interrupted`]) or when the command has not started within
/// the boot timeout. The shared directory is emptied first, so that nothing of an earlier boot is read
/// as this one's.
pub(crate) fn boot_once(
    vng: &Path,
    args: &[String],
    path_var: &std::ffi::OsStr,
    home: &Path,
    shared: &Path,
    log_path: &Path,
    opts: &VmOptions,
) -> Result<Attempt, VmError> {
    let entries = std::fs::read_dir(shared)
        .map_err(|e| VmError::io(format!("reading {}", shared.display()), e))?;
    for e in entries.flatten() {
        let _ = std::fs::remove_file(e.path());
    }
    let log = std::fs::File::create(log_path)
        .map_err(|e| VmError::io(format!("creating {}", log_path.display()), e))?;
    let log2 = log
        .try_clone()
        .map_err(|e| VmError::io("duplicating a file handle", e))?;
    let load0 = HostLoad::now();
    let started = Instant::now();
    let child = Command::new(vng)
        .args(args)
        .env("PATH", path_var)
        .env("HOME", home)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .process_group(0)
        .spawn()
        .map_err(|e| VmError::io(format!("starting {}", vng.display()), e))?;
    let mut group = Group { child, done: false };
    let mut boot: Option<Duration> = None;
    // The vCPU threads' times: read when the command starts, then at every poll until it ends (the guest
    // may power off within a poll of writing its status, taking QEMU's threads with it), the last reading
    // ending the window.
    let proc = Path::new("/proc");
    let mut threads = None;
    let mut vcpus_at_start = None;
    let mut vcpus_last = None;
    let mut ended: Option<Duration> = None;
    loop {
        if osutil::stop::interrupted() {
            group.stop();
            return Err(VmError::Interrupted);
        }
        if boot.is_none() && shared.join("started").exists() {
            boot = Some(started.elapsed());
            threads =
                vcpus::find_qemu(proc, group.pgid() as u32).and_then(|p| vcpus::threads(proc, p));
            vcpus_at_start = threads.as_deref().and_then(vcpus::read_threads);
        } else if boot.is_some() && ended.is_none() {
            let done = shared.join("status").exists();
            if let Some(r) = threads.as_deref().and_then(vcpus::read_threads) {
                vcpus_last = Some(r);
            }
            if done {
                ended = Some(started.elapsed());
            }
        }
        if boot.is_none() && started.elapsed() > opts.boot_timeout {
            group.stop();
            return Err(VmError::BootTimedOut {
                secs: opts.boot_timeout.as_secs(),
                log_tail: tail(log_path, 25),
            });
        }
        match group.child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) => {}
            Err(e) => return Err(VmError::io("waiting for virtme-ng", e)),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    group.done = true;
    let wall = started.elapsed();
    drop(group); // kills a QEMU that outlived vng
    let vcpu_times = match (&vcpus_at_start, &vcpus_last) {
        (Some(a), Some(b)) if ended.is_some() => vcpus::between(a, b),
        _ => Vec::new(),
    };
    Ok(Attempt {
        boot,
        wall,
        host_other_busy_pct: load0.and_then(|l| l.others_pct(wall)),
        command: boot.zip(ended).and_then(|(b, e)| e.checked_sub(b)),
        vcpu_times,
    })
}
