//! A cgroup2 directory a test makes for a throwaway cluster it started, removed when dropped.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// A directory under the cgroup2 mount (from /proc/mounts), made by the test and removed on drop once it
/// is empty (the cluster stopped): nothing else is moved into or out of it.
pub struct TestCgroup {
    /// The directory.
    pub dir: PathBuf,
    /// Its path as /proc/PID/cgroup shows it (`/preemptlab-test-...`).
    pub path: String,
}

impl TestCgroup {
    /// Makes `<mount>/<name>-<our pid>`.
    pub fn make(name: &str) -> TestCgroup {
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
        let mount = diagnose::cgroup::cgroup2_mount(&mounts)
            .expect("a cgroup2 file system mounted (diagnose's cgroup scope needs one)");
        let leaf = format!("{name}-{}", std::process::id());
        let dir = mount.join(&leaf);
        std::fs::create_dir(&dir)
            .unwrap_or_else(|e| panic!("mkdir {}: {e} (needs root)", dir.display()));
        TestCgroup {
            dir,
            path: format!("/{leaf}"),
        }
    }

    /// Moves a process this test started into the directory.
    pub fn adopt(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("moving {pid} into {}: {e}", self.dir.display()));
    }

    /// Moves a postmaster and then its children (a child forked after the postmaster moved is born
    /// inside).
    pub fn adopt_instance(&self, pm: u32) {
        self.adopt(pm);
        let kids = std::fs::read_to_string(format!("/proc/{pm}/task/{pm}/children")).unwrap();
        for k in kids
            .split_whitespace()
            .filter_map(|w| w.parse::<u32>().ok())
        {
            if Path::new(&format!("/proc/{k}")).exists() {
                let _ = std::fs::write(self.dir.join("cgroup.procs"), k.to_string());
            }
        }
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // rmdir succeeds once the last task has left; the cluster's processes exit when it stops.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("could not remove {} (tasks left in it)", self.dir.display());
    }
}
