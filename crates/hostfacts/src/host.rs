//! Reading host files under a root directory.
//!
//! `Host::live()` reads `/proc`, `/sys`, `/boot` and `/dev/kmsg` of this machine; `Host::at(dir)` reads the
//! same paths under `dir` (a fixture tree or a copy of another host), which is what `--sysroot` does.

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use osutil::explain_io_error;

use crate::fact::Fact;

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
        let bytes = fs::read(self.path(host_path)).map_err(|e| self.error(host_path, &e))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Reads a binary file.
    pub fn read_bytes(&self, host_path: &str) -> Result<Vec<u8>, ReadError> {
        fs::read(self.path(host_path)).map_err(|e| self.error(host_path, &e))
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

    /// Reads the kernel log: `/dev/kmsg` (one record per read, non-blocking, stops when drained) or, in a
    /// fixture tree, a plain file of that name. Falls back to `/var/log/dmesg`.
    pub fn read_kernel_log(&self) -> Result<(String, &'static str), ReadError> {
        match self.read_kmsg() {
            Ok(text) => Ok((text, "/dev/kmsg")),
            Err(first) => match self.read("/var/log/dmesg") {
                Ok(text) => Ok((text, "/var/log/dmesg")),
                Err(_) => Err(first),
            },
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
