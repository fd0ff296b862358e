//! Result files: checked before any work, written atomically, never over what they must not replace.
//!
//! A bench that measures for minutes and then cannot write its result has lost the work, so every command
//! that writes a file proves first that it can ([`check_writable`], [`ResultFile::claim`]), before it
//! measures anything. Writes go to a temp file with a name unique to this process in the destination's
//! directory, renamed into place: a reader never sees a half-written file, and two runs writing beside each
//! other never share a temp file.
//!
//! What a path may be is decided in [`dest`]: a regular file or a new one, or a stream the user named to be
//! written in place (`/dev/null`, `/dev/stdout`, `/dev/fd/N`); a device node, FIFO, socket or directory is
//! refused, never replaced. An output is never one of the run's inputs ([`check_not_input`]) and two
//! outputs of one run are never the same file ([`check_distinct`]).

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::explain_io_error;

pub mod dest;

pub use dest::{
    check_distinct, check_not_input, destination, same_file, Destination, ResultFile, Stream,
};

/// Why a result file cannot be written. The messages name the path and the fix; a command line adds how
/// its user names another path.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The path is a directory.
    #[error("{} is a directory: give a file name for the result", .path.display())]
    IsDirectory {
        /// The path given.
        path: PathBuf,
    },
    /// The path exists and is not a regular file (a device node, a FIFO, a socket).
    #[error("{} is {what}, not a regular file: a result is written only to a regular file (or in place to /dev/stdout, /dev/stderr, /dev/fd/N or /dev/null); give a file path", .path.display())]
    NotRegular {
        /// The path given.
        path: PathBuf,
        /// What it is, in words ("a character device").
        what: &'static str,
    },
    /// A symbolic link to nothing.
    #[error("{} is a symbolic link to a file that does not exist: give the file's own path", .path.display())]
    DanglingLink {
        /// The path given.
        path: PathBuf,
    },
    /// A stream named by its descriptor that cannot be written.
    #[error("{}: the descriptor is {why}: give a file path", .path.display())]
    StreamClosed {
        /// The path given (`/dev/fd/N`).
        path: PathBuf,
        /// Why ("not open in this process").
        why: &'static str,
    },
    /// The output is one of the run's input files.
    #[error("{} is also an input ({}): write the result to another file", .path.display(), .input.display())]
    IsInput {
        /// The output path.
        path: PathBuf,
        /// The input it is.
        input: PathBuf,
    },
    /// Two outputs of one run are the same file.
    #[error("{} and {} are the same file: give each output its own", .a.display(), .b.display())]
    SameFile {
        /// One output.
        a: PathBuf,
        /// The other.
        b: PathBuf,
    },
    /// The directory for the file could not be created.
    #[error("cannot create {} for the result: {}", .dir.display(), explain_io_error(.err))]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// What creating it said.
        err: std::io::Error,
    },
    /// A file could not be created in the directory.
    #[error("cannot write in {}: {}", .dir.display(), explain_io_error(.err))]
    NotWritable {
        /// The directory.
        dir: PathBuf,
        /// What creating a file there said.
        err: std::io::Error,
    },
    /// Writing the temp file failed (disk full, I/O error).
    #[error("writing {}: {}", .path.display(), explain_io_error(.err))]
    Write {
        /// The temp file.
        path: PathBuf,
        /// What the write said.
        err: std::io::Error,
    },
    /// Renaming the temp file into place failed.
    #[error("renaming {} to {}: {}", .from.display(), .to.display(), explain_io_error(.err))]
    Rename {
        /// The temp file.
        from: PathBuf,
        /// The destination.
        to: PathBuf,
        /// What the rename said.
        err: std::io::Error,
    },
    /// A published file's directory does not exist (it is the operator's to create).
    #[error("{}: directory {} does not exist (create it, or give a path in an existing directory)", .path.display(), .dir.display())]
    NoDirectory {
        /// The path given.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
    },
    /// A path to publish that is a directory.
    #[error("{}: is a directory (give a file name, e.g. {}/preemptlab.prom)", .path.display(), .path.display())]
    PublishDirectory {
        /// The path given.
        path: PathBuf,
    },
    /// A path without a file name (`/`, `..`).
    #[error("{}: give a file name", .path.display())]
    NoFileName {
        /// The path given.
        path: PathBuf,
    },
    /// The value could not be serialized (a bug: result types always serialize).
    #[error("serializing the result for {}: {err}", .path.display())]
    Serialize {
        /// The destination.
        path: PathBuf,
        /// What serde said.
        err: serde_json::Error,
    },
}

impl OutputError {
    /// The I/O error behind it, explained ([`explain_io_error`]); for a caller whose own message names
    /// the path and the step. The serialization error has none.
    pub fn explained(&self) -> String {
        match self {
            OutputError::CreateDir { err, .. }
            | OutputError::NotWritable { err, .. }
            | OutputError::Write { err, .. }
            | OutputError::Rename { err, .. } => explain_io_error(err),
            other => other.to_string(),
        }
    }

    /// True when another path would do (the directory cannot be made or written): the cases a command
    /// line answers with how to give one.
    pub fn wants_another_path(&self) -> bool {
        matches!(
            self,
            OutputError::CreateDir { .. } | OutputError::NotWritable { .. }
        )
    }
}

/// Can `path` be written? A stream ([`destination`]) can; for a file, creates its directory, then creates
/// and removes a temp file there. The error names the path and what to do.
pub fn check_writable(path: &Path) -> Result<(), OutputError> {
    let path = match destination(path)? {
        Destination::InPlace(_) => return Ok(()),
        Destination::File(p) => p,
    };
    let path = path.as_path();
    let dir = parent(path);
    // The directories this check creates, deepest last: removed again afterwards, so that a run refused
    // later (bad input found after the check) leaves nothing behind; the write creates them for good.
    let mut created = Vec::new();
    let mut d = Some(dir);
    while let Some(x) = d.filter(|x| !x.as_os_str().is_empty() && !x.exists()) {
        created.push(x.to_path_buf());
        d = x.parent();
    }
    let res = std::fs::create_dir_all(dir)
        .map_err(|err| OutputError::CreateDir {
            dir: dir.to_path_buf(),
            err,
        })
        .and_then(|()| {
            tempfile::Builder::new()
                .prefix(".preemptlab-check-")
                .tempfile_in(dir)
                .map(drop)
                .map_err(|err| OutputError::NotWritable {
                    dir: dir.to_path_buf(),
                    err,
                })
        });
    for d in &created {
        let _ = std::fs::remove_dir(d);
    }
    res
}

/// Writes `value` as pretty JSON to `path` atomically, creating the directory.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), OutputError> {
    let text = serde_json::to_string_pretty(value).map_err(|err| OutputError::Serialize {
        path: path.to_path_buf(),
        err,
    })?;
    write_atomic(path, &(text + "\n"))
}

/// Writes `text` to `path` atomically: a temp file unique to this process in the same directory, then a
/// rename. Creates the directory. On error nothing is left behind. A stream ([`destination`]) is written
/// in place; any other path that is not a regular file is refused. The file gets the mode any new file
/// gets (0666 less the umask: 0644 under the usual 022), or the mode of the file it replaces: a result
/// or report is for others to read unless the umask or an existing file's mode says otherwise.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), OutputError> {
    let path = match destination(path)? {
        Destination::InPlace(s) => return dest::write_stream(path, s, text),
        Destination::File(p) => p,
    };
    let path = path.as_path();
    let dir = parent(path);
    std::fs::create_dir_all(dir).map_err(|err| OutputError::CreateDir {
        dir: dir.to_path_buf(),
        err,
    })?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let replaced = std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.permissions());
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(|err| OutputError::NotWritable {
            dir: dir.to_path_buf(),
            err,
        })?;
    tmp.write_all(text.as_bytes())
        .and_then(|()| tmp.flush())
        .map_err(|err| OutputError::Write {
            path: tmp.path().to_path_buf(),
            err,
        })?;
    if let Some(mode) = replaced {
        std::fs::set_permissions(tmp.path(), mode).map_err(|err| OutputError::Write {
            path: tmp.path().to_path_buf(),
            err,
        })?;
    }
    let from = tmp.path().to_path_buf();
    tmp.persist(path)
        .map(drop)
        .map_err(|e| OutputError::Rename {
            from,
            to: path.to_path_buf(),
            err: e.error,
        })
}

/// Can `path` be published with [`publish`]? A stream ([`destination`]) can. Otherwise its directory must
/// already exist (a directory that readers watch, such as node_exporter's textfile directory, is the
/// operator's to create: a typo should not silently make a new one), `path` must not be a directory or
/// any other thing than a regular file, it must have a file name, and a file must be creatable in the
/// directory (a temp file named as [`publish`]'s are, which no `*.prom` reader picks up, made and
/// removed): `/proc/d.json`, a path under `/sys` or a directory the user cannot write is refused here, not
/// after a diagnosis window of hours. Checked before any work; the error names the path and what to do.
pub fn check_publishable(path: &Path) -> Result<(), OutputError> {
    let path = match publish_destination(path)? {
        Destination::InPlace(_) => return Ok(()),
        Destination::File(p) => p,
    };
    let path = path.as_path();
    let dir = parent(path);
    if !dir.is_dir() {
        return Err(OutputError::NoDirectory {
            path: path.to_path_buf(),
            dir: dir.to_path_buf(),
        });
    }
    if path.is_dir() {
        return Err(OutputError::PublishDirectory {
            path: path.to_path_buf(),
        });
    }
    if path.file_name().is_none() {
        return Err(OutputError::NoFileName {
            path: path.to_path_buf(),
        });
    }
    tempfile::Builder::new()
        .prefix(".preemptlab-check-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map(drop)
        .map_err(|err| OutputError::NotWritable {
            dir: dir.to_path_buf(),
            err,
        })
}

/// Where a published file goes ([`destination`]), a directory named as the file being the publishing
/// error (it says the directory is the operator's to point at a file in).
fn publish_destination(path: &Path) -> Result<Destination, OutputError> {
    destination(path).map_err(|e| match e {
        OutputError::IsDirectory { .. } => OutputError::PublishDirectory {
            path: path.to_path_buf(),
        },
        e => e,
    })
}

/// Writes `text` to `path` for readers that may look at any moment and may run as another user (a
/// textfile collector scraping on its own schedule): a temp file in the same directory (same file system,
/// so the rename is atomic), named `.NAME.PID-NANOS.tmp` so that two concurrent runs never share one and a
/// collector reading only `*.prom` never picks it up, written, fsynced, made world-readable (0644), then
/// renamed over `path`. A reader opens either the old file or the new one, never a half-written one. The
/// directory is not created (see [`check_publishable`]); the temp file is removed on any failure. A stream
/// ([`destination`]) is written in place; any other path that is not a regular file is refused.
pub fn publish(path: &Path, text: &str) -> Result<(), OutputError> {
    let path = match publish_destination(path)? {
        Destination::InPlace(s) => return dest::write_stream(path, s, text),
        Destination::File(p) => p,
    };
    let path = path.as_path();
    let dir = parent(path);
    let name = path.file_name().ok_or_else(|| OutputError::NoFileName {
        path: path.to_path_buf(),
    })?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = dir.join(format!(
        ".{}.{}-{nanos}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| -> Result<(), OutputError> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)
            .map_err(|err| OutputError::NotWritable {
                dir: dir.to_path_buf(),
                err,
            })?;
        f.write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|err| OutputError::Write {
                path: tmp.clone(),
                err,
            })?;
        std::fs::rename(&tmp, path).map_err(|err| OutputError::Rename {
            from: tmp.clone(),
            to: path.to_path_buf(),
            err,
        })
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwritable_paths_are_refused_before_work() {
        let e = check_writable(Path::new("/proc/x/r.json")).unwrap_err();
        assert!(e.wants_another_path(), "{e}");
        assert!(e.to_string().starts_with("cannot create /proc/x"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let e = check_writable(dir.path()).unwrap_err();
        assert!(!e.wants_another_path(), "{e}");
        assert!(e.to_string().contains("is a directory"), "{e}");
        check_writable(&dir.path().join("sub/deeper/r.json")).unwrap();
        // The check leaves nothing, not even the directories it created to try.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// Regression (issue 46 item 1): `diagnose --out /proc/d.json` was checked only for an existing
    /// directory, and the write failed after the whole window; a directory no file can be made in is refused
    /// by the check, which leaves nothing behind.
    #[test]
    fn publish_to_an_unwritable_directory_checked_only_after_the_window_regression() {
        for p in ["/proc/d.json", "/sys/d.json", "/sys/kernel/d.prom"] {
            let e = check_publishable(Path::new(p)).unwrap_err();
            assert!(e.wants_another_path(), "{p}: {e}");
            assert!(e.to_string().starts_with("cannot write in /"), "{p}: {e}");
        }
        let dir = tempfile::tempdir().unwrap();
        check_publishable(&dir.path().join("d.prom")).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn atomic_write_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        write_atomic(&p, "one\n").unwrap();
        write_atomic(&p, "two\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // Naming a directory fails and leaves nothing beside it.
        assert!(write_atomic(dir.path(), "x").is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// Issue 25 item 5: report files were written 0600 (the temp file's mode), unreadable to the
    /// colleagues they are for.
    #[test]
    fn report_files_written_0600_regression() {
        // SAFETY: umask has no preconditions; it returns the old mask, which is put back at once.
        let umask = unsafe {
            let old = libc::umask(0o022);
            libc::umask(old);
            old
        };
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("page.html");
        write_atomic(&p, "x").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode(&p),
            0o666 & !(umask as u32),
            "a new file: 0666 less the umask"
        );
        // A file the user made private stays private when rewritten.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_atomic(&p, "y").unwrap();
        assert_eq!(mode(&p), 0o600);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "y");
    }
}
