//! Where an output path leads, decided before any work and again at the write.
//!
//! A result is written only to a regular file (a new one, or one replaced atomically) or, in place, to a
//! stream the user named for that: `/dev/null`, `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`,
//! `/proc/self/fd/N` (process substitution, `--out >(gzip > r.json.gz)`, names one of the last). Any other
//! path that exists and is not a regular file (a device node, a FIFO, a socket, a directory) is refused:
//! renaming a temp file over it would replace the node (as root, `--out` naming a copy of /dev/null made
//! with mknod replaced it with a regular file), and writing into it is not what a result file is for. A
//! symbolic link to a regular file is followed (the link stays, its target is replaced).
//!
//! A stream is written through the descriptor itself (a `dup` of fd N), not by opening its name again:
//! opening `/dev/stdout` reopens the file behind it at offset 0, which would overwrite what the shell's
//! `>` redirection already holds, and would not append after `>>`.

use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::io::FromRawFd;
use std::path::{Path, PathBuf};

use super::{check_writable, write_atomic, OutputError};

/// A stream written in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// `/dev/null`: the result is dropped.
    Null,
    /// An open file descriptor: `/dev/stdout` (1), `/dev/stderr` (2), `/dev/fd/N`, `/proc/self/fd/N`.
    Fd(i32),
}

/// Where an output path leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// A regular file, or no file yet: written atomically (temp file + rename) at this path (a symbolic
    /// link's target when the path given is a link to a regular file).
    File(PathBuf),
    /// A stream the path names, written in place and never replaced.
    InPlace(Stream),
}

/// The stream a path names by its spelling, before looking at what is there.
fn stream_named(path: &Path) -> Option<Stream> {
    let s = path.to_str()?;
    match s {
        "/dev/null" => Some(Stream::Null),
        "/dev/stdout" => Some(Stream::Fd(1)),
        "/dev/stderr" => Some(Stream::Fd(2)),
        _ => s
            .strip_prefix("/dev/fd/")
            .or_else(|| s.strip_prefix("/proc/self/fd/"))
            .and_then(|n| n.parse::<i32>().ok())
            .filter(|n| *n >= 0)
            .map(Stream::Fd),
    }
}

/// What a file type is, in words, for a refusal.
fn kind_in_words(t: &std::fs::FileType) -> &'static str {
    if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

fn refuse(path: &Path, t: &std::fs::FileType) -> OutputError {
    if t.is_dir() {
        return OutputError::IsDirectory {
            path: path.to_path_buf(),
        };
    }
    OutputError::NotRegular {
        path: path.to_path_buf(),
        what: kind_in_words(t),
    }
}

/// Where `path` leads, or why it cannot take a result. Paths that do not exist (or cannot be looked at:
/// the write's own checks say why) are new files.
pub fn destination(path: &Path) -> Result<Destination, OutputError> {
    if let Some(stream) = stream_named(path) {
        if let Stream::Fd(fd) = stream {
            check_fd(path, fd)?;
        }
        return Ok(Destination::InPlace(stream));
    }
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(Destination::File(path.to_path_buf()));
    };
    if meta.file_type().is_symlink() {
        return match std::fs::metadata(path) {
            Ok(t) if t.is_file() => Ok(Destination::File(
                std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
            )),
            Ok(t) => Err(refuse(path, &t.file_type())),
            Err(_) => Err(OutputError::DanglingLink {
                path: path.to_path_buf(),
            }),
        };
    }
    if meta.is_file() {
        Ok(Destination::File(path.to_path_buf()))
    } else {
        Err(refuse(path, &meta.file_type()))
    }
}

/// Is descriptor `fd` open for writing?
fn check_fd(path: &Path, fd: i32) -> Result<(), OutputError> {
    // SAFETY: F_GETFL only reads the descriptor's status flags; an fd that is not open gives EBADF.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    let why = if flags < 0 {
        "not open in this process"
    } else if flags & libc::O_ACCMODE == libc::O_RDONLY {
        "open for reading only"
    } else {
        return Ok(());
    };
    Err(OutputError::StreamClosed {
        path: path.to_path_buf(),
        why,
    })
}

/// Writes `text` into `stream` in place. A reader that went away (`--out /dev/stdout | head -1`) is not an
/// error, as for the command's own stdout.
pub(crate) fn write_stream(path: &Path, stream: Stream, text: &str) -> Result<(), OutputError> {
    let file = match stream {
        Stream::Null => std::fs::OpenOptions::new().write(true).open("/dev/null"),
        Stream::Fd(fd) => {
            check_fd(path, fd)?;
            // SAFETY: dup of a descriptor checked open above; the new descriptor is owned by the File and
            // closed when it drops, the original stays open.
            let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
            if dup < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                // SAFETY: `dup` is a fresh descriptor nothing else owns.
                Ok(unsafe { std::fs::File::from_raw_fd(dup) })
            }
        }
    };
    let res = file.and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.flush()));
    match res {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(err) => Err(OutputError::Write {
            path: path.to_path_buf(),
            err,
        }),
        Ok(()) => Ok(()),
    }
}

/// The path made absolute for comparison: its directory resolved when it exists, else as given from the
/// current directory.
fn absolute(p: &Path) -> PathBuf {
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match (std::fs::canonicalize(dir), p.file_name()) {
        (Ok(d), Some(name)) => d.join(name),
        _ => std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()),
    }
}

/// True when `a` and `b` name the same file: the same device and inode when both exist, else the same
/// absolute path (directories resolved through symbolic links).
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        (Err(_), Err(_)) => absolute(a) == absolute(b),
        _ => false,
    }
}

/// Refuses an output that is one of the run's input files (`report --out X X` overwrote its own input
/// with HTML). `/dev/null` is no one's input.
pub fn check_not_input(out: &Path, inputs: &[PathBuf]) -> Result<(), OutputError> {
    if stream_named(out) == Some(Stream::Null) {
        return Ok(());
    }
    match inputs.iter().find(|i| same_file(out, i)) {
        Some(input) => Err(OutputError::IsInput {
            path: out.to_path_buf(),
            input: input.clone(),
        }),
        None => Ok(()),
    }
}

/// Refuses two outputs of one run that are the same file (`check --out F --report F`); `/dev/null` may
/// take both.
pub fn check_distinct(a: &Path, b: &Path) -> Result<(), OutputError> {
    let null = |p| stream_named(p) == Some(Stream::Null);
    if (null(a) && null(b)) || !same_file(a, b) {
        return Ok(());
    }
    Err(OutputError::SameFile {
        a: a.to_path_buf(),
        b: b.to_path_buf(),
    })
}

/// A result file a run rewrites after each cell, claimed before any work.
///
/// A regular file is written where it is, atomically each time. A stream (`--out /dev/stdout`) would get a
/// whole document per cell: the run writes to a private staged file instead, and [`ResultFile::finish`]
/// writes the last version into the stream once. The staged file goes with this value (a temp dir).
#[derive(Debug)]
pub struct ResultFile {
    dest: PathBuf,
    stage: Option<tempfile::TempDir>,
}

impl ResultFile {
    /// Checks that `path` can take the result (see [`destination`] and [`check_writable`]) and claims it.
    pub fn claim(path: &Path) -> Result<ResultFile, OutputError> {
        let stage = match destination(path)? {
            Destination::File(_) => {
                check_writable(path)?;
                None
            }
            Destination::InPlace(_) => Some(
                tempfile::Builder::new()
                    .prefix("preemptlab-out-")
                    .tempdir()
                    .map_err(|err| OutputError::NotWritable {
                        dir: std::env::temp_dir(),
                        err,
                    })?,
            ),
        };
        Ok(ResultFile {
            dest: path.to_path_buf(),
            stage,
        })
    }

    /// Where the run writes its result as it goes.
    pub fn path(&self) -> PathBuf {
        match &self.stage {
            Some(d) => d.path().join("result.json"),
            None => self.dest.clone(),
        }
    }

    /// The path given, for messages ("result written to ...").
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Writes a staged result into its stream (a regular file is already in place). Without a staged file
    /// (the run wrote nothing) nothing is written.
    pub fn finish(&self) -> Result<(), OutputError> {
        let Some(d) = &self.stage else {
            return Ok(());
        };
        match std::fs::read_to_string(d.path().join("result.json")) {
            Ok(text) => write_atomic(&self.dest, &text),
            Err(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(p: &Path) {
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path in the test's own temp dir.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn streams_by_name_and_files_by_kind() {
        assert_eq!(
            destination(Path::new("/dev/null")).unwrap(),
            Destination::InPlace(Stream::Null)
        );
        assert_eq!(
            destination(Path::new("/dev/stderr")).unwrap(),
            Destination::InPlace(Stream::Fd(2))
        );
        // A descriptor this process does not have.
        let e = destination(Path::new("/dev/fd/987")).unwrap_err();
        assert!(e.to_string().contains("not open"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("r.json");
        assert_eq!(destination(&new).unwrap(), Destination::File(new.clone()));
        std::fs::write(&new, "x").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&new, &link).unwrap();
        assert_eq!(
            destination(&link).unwrap(),
            Destination::File(std::fs::canonicalize(&new).unwrap())
        );
        let dangling = dir.path().join("dangling.json");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert!(matches!(
            destination(&dangling),
            Err(OutputError::DanglingLink { .. })
        ));
        assert!(matches!(
            destination(dir.path()),
            Err(OutputError::IsDirectory { .. })
        ));
    }

    /// Regression (issue 29): `--out` naming a FIFO, a socket or a device node replaced the node with a
    /// regular file (a copy of /dev/null made with mknod, as root), or would have written into it.
    #[test]
    fn a_fifo_or_device_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("out.json");
        mkfifo(&fifo);
        let e = check_writable(&fifo).unwrap_err();
        assert!(e.to_string().contains("is a FIFO"), "{e}");
        let e = write_atomic(&fifo, "x").unwrap_err();
        assert!(e.to_string().contains("is a FIFO"), "{e}");
        assert!(publish_refuses(&fifo));
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
        let link = dir.path().join("null-link.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = write_atomic(&link, "x").unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        let sock = dir.path().join("s.json");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert!(check_writable(&sock)
            .unwrap_err()
            .to_string()
            .contains("a socket"));
        // Nothing beside them: no temp file.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
    }

    fn publish_refuses(p: &Path) -> bool {
        super::super::check_publishable(p).is_err() && super::super::publish(p, "x").is_err()
    }

    #[test]
    fn dev_null_is_written_in_place_and_stays_a_device() {
        write_atomic(Path::new("/dev/null"), "x").unwrap();
        super::super::publish(Path::new("/dev/null"), "x").unwrap();
        check_writable(Path::new("/dev/null")).unwrap();
        let t = std::fs::metadata("/dev/null").unwrap().file_type();
        assert!(t.is_char_device());
    }

    #[test]
    fn a_descriptor_is_written_in_place_at_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "before\n").unwrap();
        let f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        use std::os::unix::io::AsRawFd;
        let name = PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()));
        write_atomic(&name, "after\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "before\nafter\n");
        drop(f);
        let r = std::fs::File::open(&p).unwrap();
        let name = PathBuf::from(format!("/dev/fd/{}", r.as_raw_fd()));
        assert!(write_atomic(&name, "x")
            .unwrap_err()
            .to_string()
            .contains("reading only"));
    }

    /// Regression (issue 29): `report --out X X` overwrote its own input; `check --out F --report F` was
    /// accepted.
    #[test]
    fn inputs_are_never_outputs_and_two_outputs_differ() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.json");
        std::fs::write(&a, "{}").unwrap();
        let e = check_not_input(&a, &[PathBuf::from("x.json"), a.clone()]).unwrap_err();
        assert!(e.to_string().contains("is also an input"), "{e}");
        let dotted = dir.path().join(".").join("a.json");
        assert!(check_not_input(&dotted, std::slice::from_ref(&a)).is_err());
        check_not_input(&dir.path().join("b.json"), std::slice::from_ref(&a)).unwrap();
        check_not_input(Path::new("/dev/null"), &[PathBuf::from("/dev/null")]).unwrap();
        let new = dir.path().join("new.html");
        assert!(check_distinct(&new, &dir.path().join("./new.html")).is_err());
        check_distinct(&new, &a).unwrap();
        check_distinct(Path::new("/dev/null"), Path::new("/dev/null")).unwrap();
        assert!(check_distinct(&a, &a).is_err());
    }

    #[test]
    fn a_staged_result_reaches_its_stream_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = ResultFile::claim(&dir.path().join("r.json")).unwrap();
        assert_eq!(file.path(), dir.path().join("r.json"));
        let p = dir.path().join("stream");
        let f = std::fs::File::create(&p).unwrap();
        use std::os::unix::io::AsRawFd;
        let name = PathBuf::from(format!("/dev/fd/{}", f.as_raw_fd()));
        let staged = ResultFile::claim(&name).unwrap();
        assert_ne!(staged.path(), name);
        write_atomic(&staged.path(), "one\n").unwrap();
        write_atomic(&staged.path(), "two\n").unwrap();
        staged.finish().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two\n");
        let stage_dir = staged.path().parent().unwrap().to_path_buf();
        drop(staged);
        assert!(!stage_dir.exists());
    }
}
