//! Input files that may be anything: a path named on the command line or found in a directory of
//! other hosts' files can be a FIFO (reading it waits for a writer that never comes), a device or a socket.
//! [`read_regular`] opens without blocking and reads only a regular file; [`files`] finds the `*.json`
//! files in the paths given and reads many of them on every CPU.

pub mod files;

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// What a non-regular file is, in words: "a FIFO", "a socket", "a device", "a directory".
pub fn kind_of(ft: std::fs::FileType) -> &'static str {
    if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() || ft.is_block_device() {
        "a device"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_file() {
        "a regular file"
    } else {
        "not a file"
    }
}

/// Opens `path` for reading and returns it only when it is a regular file (a symlink's target counts);
/// otherwise an `InvalidInput` error that reads "a FIFO, not a regular file: not read". The type is checked
/// before the open, because opening a device has effects of its own even for reading (a watchdog arms, a
/// tape rewinds, a serial line raises DTR), and again on the open file (it may have been replaced between
/// the two); the open itself does not block (a FIFO's would wait for a writer) and takes no controlling
/// terminal.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let refused = |ft: std::fs::FileType| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}, not a regular file: not read", kind_of(ft)),
        )
    };
    let ft = std::fs::metadata(path)?.file_type();
    if !ft.is_file() {
        return Err(refused(ft));
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let ft = file.metadata()?.file_type();
    if ft.is_file() {
        return Ok(file);
    }
    Err(refused(ft))
}

/// The whole of the regular file at `path` ([`open_regular`]).
pub fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    open_regular(path)?.read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_at_once_and_a_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("x.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path in this test's own temp dir.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_regular(&fifo).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(e.to_string(), "a FIFO, not a regular file: not read");
        assert!(read_regular(Path::new("/dev/null"))
            .unwrap_err()
            .to_string()
            .starts_with("a device"));
        assert!(read_regular(dir.path())
            .unwrap_err()
            .to_string()
            .starts_with("a directory"));
        let f = dir.path().join("a.json");
        std::fs::write(&f, "{}").unwrap();
        assert_eq!(read_regular(&f).unwrap(), b"{}");
    }
}
