//! Reading host files under a root directory.
//!
//! `Host::live()` reads `/proc`, `/sys`, `/boot` and `/dev/kmsg` of this machine; `Host::at(dir)` reads the
//! same paths under `dir` (a fixture tree or a copy of another host), which is what `--sysroot` does.

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use osutil::explain_io_error;

use results::host::fact::Fact;

/// Why a host file could not be read, with the path as the host sees it.
#[derive(Debug, thiserror::Error)]
#[error("reading {path}: {reason}")]
pub struct ReadError {
    /// The path that failed, under the root.
    pub path: String,
    /// The reason in words, with a hint at the fix where there is one.
    pub reason: String,
    /// The I/O error kind, for callers that branch on it.
    pub kind: io::ErrorKind,
}

/// Why a directory is no captured host tree.
#[derive(Debug, thiserror::Error)]
pub enum SysrootError {
    /// Not a directory at all.
    #[error("{}: not a directory (give a tree holding proc/ and sys/)", .dir.display())]
    NotADirectory {
        /// The path given.
        dir: PathBuf,
    },
    /// A directory without proc/ or sys/.
    #[error("{}: holds neither proc/ nor sys/ (give the root of a captured host tree)", .dir.display())]
    NoHostTree {
        /// The path given.
        dir: PathBuf,
    },
}

/// Where a captured host tree keeps its kernel log, in the order the audit reads them: the ring buffer
/// (`dev/kmsg`, as scripts/capture-sysroot saves it), rsyslog's `kern.log`, the boot-time `dmesg`, and an
/// export of the kernel's journal (`journalctl -k -b -o export`, which scripts/capture-sysroot saves too).
/// Of a log holding several boots, the latest is read ([`crate::parse::boot_log_preempt`]).
pub const CAPTURED_KERNEL_LOGS: [&str; 4] = [
    "/dev/kmsg",
    "/var/log/kern.log",
    "/var/log/dmesg",
    "/var/log/journal-kernel.export",
];

/// A view of a host's files under a root directory.
#[derive(Debug, Clone)]
pub struct Host {
    root: PathBuf,
    live: bool,
}

impl Host {
    /// This machine.
    pub fn live() -> Self {
        Host {
            root: PathBuf::from("/"),
            live: true,
        }
    }

    /// Another host's files copied under `root`, checked to be a captured host tree (proc/ or sys/).
    pub fn at_checked(root: &Path) -> Result<Self, SysrootError> {
        let dir = root.to_path_buf();
        if !root.is_dir() {
            return Err(SysrootError::NotADirectory { dir });
        }
        if !root.join("proc").is_dir() && !root.join("sys").is_dir() {
            return Err(SysrootError::NoHostTree { dir });
        }
        Ok(Host::at(dir))
    }

    /// A host whose files are read under `root` (fixtures, copies of other hosts), unchecked.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let live = root == Path::new("/");
        Host { root, live }
    }

    /// True when this is the running machine (live probes such as prctl or a connection make sense).
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The real path of a host path such as `/proc/meminfo`.
    pub fn path(&self, host_path: &str) -> PathBuf {
        self.root.join(host_path.trim_start_matches('/'))
    }

    fn shown(&self, host_path: &str) -> String {
        if self.live {
            host_path.to_string()
        } else {
            self.path(host_path).display().to_string()
        }
    }

    fn error(&self, host_path: &str, err: &io::Error) -> ReadError {
        ReadError {
            path: self.shown(host_path),
            reason: explain_io_error(err),
            kind: err.kind(),
        }
    }

    /// Reads a text file.
    pub fn read(&self, host_path: &str) -> Result<String, ReadError> {
        let bytes = self.read_bytes(host_path)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Reads a binary file. It is opened without blocking and read only when it is a regular file: a FIFO,
    /// socket or device (under `--sysroot`, anything can be there) would otherwise hang the reader or read
    /// another thing than a copy of the host's file.
    pub fn read_bytes(&self, host_path: &str) -> Result<Vec<u8>, ReadError> {
        let mut file = self.open_regular(host_path)?;
        let mut out = Vec::new();
        file.read_to_end(&mut out)
            .map_err(|e| self.error(host_path, &e))?;
        Ok(out)
    }

    fn open_regular(&self, host_path: &str) -> Result<fs::File, ReadError> {
        // Checked before it is opened (opening a device has effects of its own), without blocking.
        osutil::input::open_regular(&self.path(host_path)).map_err(|e| {
            if e.kind() == io::ErrorKind::InvalidInput {
                ReadError {
                    path: self.shown(host_path),
                    reason: e.to_string(),
                    kind: io::ErrorKind::InvalidInput,
                }
            } else {
                self.error(host_path, &e)
            }
        })
    }

    /// Reads a text file into a fact: trimmed content, or the reason it is unavailable.
    pub fn fact(&self, host_path: &str) -> Fact<String> {
        match self.read(host_path) {
            Ok(s) => Fact::known(s.trim().to_string(), host_path),
            Err(e) => Fact::unavailable(host_path, e.reason),
        }
    }

    /// Reads a symbolic link's target.
    pub fn read_link(&self, host_path: &str) -> Result<PathBuf, ReadError> {
        fs::read_link(self.path(host_path)).map_err(|e| self.error(host_path, &e))
    }

    /// `path` as seen inside the root directory `root` (a container's `/proc/PID/root`): its symbolic
    /// links followed within that root, as the kernel does for the processes inside (an absolute link
    /// such as Debian's `/var/run -> /run` otherwise leaves the container and lands on this host's).
    /// Returns `root` + the resolved path; a link that cannot be read stops the walk where it is (what
    /// follows is kept as given), and more than 40 links give up.
    pub fn in_root(&self, root: &str, path: &str) -> String {
        let mut done = String::new();
        let mut todo: Vec<String> = path
            .split('/')
            .filter(|c| !c.is_empty())
            .rev()
            .map(str::to_string)
            .collect();
        let mut links = 0;
        while let Some(c) = todo.pop() {
            match c.as_str() {
                "." => continue,
                ".." => {
                    done.truncate(done.rfind('/').unwrap_or(0));
                    continue;
                }
                _ => {}
            }
            let next = format!("{done}/{c}");
            match fs::symlink_metadata(self.path(&format!("{root}{next}"))) {
                Ok(md) if md.file_type().is_symlink() && links < 40 => {
                    links += 1;
                    let Ok(target) = self.read_link(&format!("{root}{next}")) else {
                        done = next;
                        continue;
                    };
                    let target = target.to_string_lossy().into_owned();
                    if target.starts_with('/') {
                        done.clear();
                    }
                    todo.extend(
                        target
                            .split('/')
                            .filter(|c| !c.is_empty())
                            .rev()
                            .map(str::to_string),
                    );
                }
                _ => done = next,
            }
        }
        format!("{root}{}", if done.is_empty() { "/" } else { &done })
    }

    /// Lists the names in a directory, sorted.
    pub fn list_dir(&self, host_path: &str) -> Result<Vec<String>, ReadError> {
        let rd = fs::read_dir(self.path(host_path)).map_err(|e| self.error(host_path, &e))?;
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    /// True when the host path exists.
    pub fn exists(&self, host_path: &str) -> bool {
        self.path(host_path).exists()
    }

    /// Reads the kernel log and says where from. This host: `/dev/kmsg` (one record per read, non-blocking,
    /// stops when drained), else `/var/log/dmesg` (written at boot). A captured tree (`--sysroot`): the first
    /// of [`CAPTURED_KERNEL_LOGS`] that holds a `Dynamic Preempt:` line, else the first readable one.
    pub fn read_kernel_log(&self) -> Result<(String, String), ReadError> {
        if self.live {
            return match self.read_kmsg() {
                Ok(text) => Ok((text, "/dev/kmsg".into())),
                Err(first) => match self.read("/var/log/dmesg") {
                    Ok(text) => Ok((text, "/var/log/dmesg".into())),
                    Err(_) => Err(first),
                },
            };
        }
        let mut first_readable = None;
        let mut first_error = None;
        for path in CAPTURED_KERNEL_LOGS {
            match self.read(path) {
                Ok(text) if text.contains("Dynamic Preempt:") => {
                    return Ok((text, path.to_string()))
                }
                Ok(text) => {
                    first_readable.get_or_insert((text, path.to_string()));
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match (first_readable, first_error) {
            (Some(found), _) => Ok(found),
            (None, Some(e)) => Err(e),
            (None, None) => unreachable!("CAPTURED_KERNEL_LOGS is not empty"),
        }
    }

    fn read_kmsg(&self) -> Result<String, ReadError> {
        let path = "/dev/kmsg";
        let mut file = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(self.path(path))
            .map_err(|e| self.error(path, &e))?;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    out.extend_from_slice(&buf[..n]);
                    if out.len() > 64 * 1024 * 1024 {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // A record overwritten while we read: the next read continues with the oldest record.
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
                Err(e) if out.is_empty() => return Err(self.error(path, &e)),
                Err(_) => break,
            }
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

#[cfg(test)]
mod tests {

    /// A container's `/var/run -> /run` is followed inside its root, not out to this host's /run, and a
    /// relative link and `..` resolve as the kernel would.
    #[test]
    fn paths_in_a_root_follow_links_inside_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ctr");
        std::fs::create_dir_all(root.join("run/postgresql")).unwrap();
        std::fs::create_dir_all(root.join("var/lib/pg/data")).unwrap();
        std::os::unix::fs::symlink("/run", root.join("var/run")).unwrap();
        std::os::unix::fs::symlink("pg/data", root.join("var/lib/current")).unwrap();
        let host = Host::live();
        let r = root.display().to_string();
        assert_eq!(
            host.in_root(&r, "/var/run/postgresql"),
            format!("{r}/run/postgresql")
        );
        assert_eq!(
            host.in_root(&r, "/var/lib/current/../data/PG_VERSION"),
            format!("{r}/var/lib/pg/data/PG_VERSION")
        );
        assert_eq!(host.in_root(&r, "/"), format!("{r}/"));
        assert_eq!(host.in_root(&r, "/no/such"), format!("{r}/no/such"));
    }

    use super::*;

    fn put(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    /// Regression (issue 29): a FIFO at sys/kernel/debug/sched/preempt under --sysroot hung the audit.
    #[test]
    fn a_fifo_or_device_under_a_sysroot_is_not_read_and_does_not_hang() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("sys/kernel/debug/sched");
        fs::create_dir_all(&dir).unwrap();
        let fifo = std::ffi::CString::new(dir.join("preempt").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path in this test's own temp dir.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let host = Host::at(root.path());
        let e = host.read("/sys/kernel/debug/sched/preempt").unwrap_err();
        assert_eq!(e.kind, io::ErrorKind::InvalidInput);
        assert!(e.reason.starts_with("a FIFO, not a regular file"), "{e}");
        std::os::unix::fs::symlink("/dev/null", root.path().join("sys/null")).unwrap();
        assert!(host
            .read("/sys/null")
            .unwrap_err()
            .reason
            .starts_with("a device"));
        // The whole audit of such a tree finishes, the model decided by what else there is.
        put(root.path(), "proc/cmdline", "quiet\n");
        let k = crate::kernel::read(&host);
        assert!(k.preemption.evidence[0]
            .note
            .as_deref()
            .unwrap()
            .starts_with("a FIFO"));
    }

    /// A captured tree's kernel log: the first of dev/kmsg, var/log/kern.log, var/log/dmesg and the journal
    /// export that holds the boot line (issue 29: only dev/kmsg was read).
    #[test]
    fn captured_kernel_logs_in_order() {
        let root = tempfile::tempdir().unwrap();
        let host = Host::at(root.path());
        assert!(host.read_kernel_log().is_err(), "none captured");
        put(
            root.path(),
            "var/log/journal-kernel.export",
            "MESSAGE=Dynamic Preempt: lazy\n",
        );
        assert_eq!(
            host.read_kernel_log().unwrap().1,
            "/var/log/journal-kernel.export"
        );
        put(
            root.path(),
            "var/log/kern.log",
            "Jun 1 kernel: [0.1] Dynamic Preempt: full\n",
        );
        assert_eq!(host.read_kernel_log().unwrap().1, "/var/log/kern.log");
        // A ring buffer that wrapped past the boot line gives way to a file that has it.
        put(root.path(), "dev/kmsg", "6,900,99,-;eth0: link up\n");
        assert_eq!(host.read_kernel_log().unwrap().1, "/var/log/kern.log");
        put(
            root.path(),
            "dev/kmsg",
            "6,88,243510,-;Dynamic Preempt: lazy\n",
        );
        assert_eq!(host.read_kernel_log().unwrap().1, "/dev/kmsg");
    }
}
