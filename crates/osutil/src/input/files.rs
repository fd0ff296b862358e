//! Input files named on the command line: finding the `*.json` files in the paths given, and reading many
//! of them on every CPU.
//!
//! The pure side (parsing, assessing, comparing) lives in `results`, `compare` and `report`; this module
//! only finds and reads, and hands each file's text to the caller's function. Errors name the path; the binary adds
//! what to do.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Why the input files could not be found or read.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// A path given does not exist or cannot be looked at (`why` is the explained I/O error).
    #[error("{}: {why}", path.display())]
    Missing { path: PathBuf, why: String },
    /// A directory given holds no `*.json` file.
    #[error("{}: no *.json files in this directory", dir.display())]
    NoJson { dir: PathBuf },
    /// A directory could not be listed.
    #[error("reading directory {}: {err}", dir.display())]
    ReadDir { dir: PathBuf, err: std::io::Error },
    /// A directory could not be listed (its `*.json` files only).
    #[error("listing {}: {err}", dir.display())]
    ListDir { dir: PathBuf, err: std::io::Error },
    /// An entry of a directory could not be looked at.
    #[error("{}: {err}", path.display())]
    Entry { path: PathBuf, err: std::io::Error },
    /// A file could not be read.
    #[error("reading {}: {err}", path.display())]
    Read { path: PathBuf, err: std::io::Error },
    /// A file is not text (a binary, or another encoding).
    #[error("{}: not a text file; give result files (JSON written by preemptlab)", path.display())]
    NotText { path: PathBuf },
    /// A file is not a result document this version reads.
    #[error("{}: {why}", path.display())]
    Parse { path: PathBuf, why: String },
}

/// A file [`read_all`] could not read; it reads as the explained I/O error ("permission denied (needs
/// root)"), which a caller records as that file's failure.
#[derive(Debug, thiserror::Error)]
#[error("{}", crate::explain_io_error(.err))]
pub struct Unreadable {
    /// What the read said.
    pub err: std::io::Error,
}

/// What [`json_files_deep`] found: the files to read, and the entries under the directories named that
/// could not be looked at or are not regular files (a subdirectory without permission, a FIFO named
/// `x.json`), each with the reason; a caller lists those, never stops at them.
#[derive(Debug, Default)]
pub struct Found {
    /// The `*.json` files, sorted, without repeats.
    pub files: Vec<PathBuf>,
    /// Entries not read, with why ("permission denied (needs root)", "a FIFO, not a regular file").
    pub unreadable: Vec<(PathBuf, String)>,
    /// The other files under the directories (not `*.json`: notes, logs), sorted, which a caller names as
    /// not read.
    pub others: Vec<PathBuf>,
}

/// Adds the `*.json` files under `dir` (recursively, skipping hidden entries) to `found`. Symlinked
/// directories are not followed (no loops); symlinked files are read. Only a directory named on the
/// command line (`top`) failing to list is an error; a subdirectory that cannot be listed, an entry that
/// cannot be looked at and a `*.json` that is not a regular file go to `found.unreadable`.
fn walk(dir: &Path, found: &mut Found, top: bool) -> Result<(), FilesError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(err) if top => {
            return Err(FilesError::ReadDir {
                dir: dir.to_path_buf(),
                err,
            })
        }
        Err(err) => {
            let why = crate::explain_io_error(&err);
            found.unreadable.push((dir.to_path_buf(), why));
            return Ok(());
        }
    };
    for e in rd {
        let e = match e {
            Ok(e) => e,
            Err(err) => {
                let why = crate::explain_io_error(&err);
                found.unreadable.push((dir.to_path_buf(), why));
                continue;
            }
        };
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = e.path();
        let ft = match e.file_type() {
            Ok(ft) => ft,
            Err(err) => {
                found.unreadable.push((path, crate::explain_io_error(&err)));
                continue;
            }
        };
        if ft.is_dir() {
            walk(&path, found, false)?;
        } else if path.extension().is_some_and(|x| x == "json") {
            if ft.is_file() || ft.is_symlink() {
                found.files.push(path);
            } else {
                let kind = super::kind_of(ft);
                let why = format!("{kind}, not a regular file: skipped");
                found.unreadable.push((path, why));
            }
        } else {
            found.others.push(path);
        }
    }
    Ok(())
}

/// Every file named, and the `*.json` files of every directory named (recursively), sorted and without
/// repeats, with the entries that could not be read listed beside them ([`Found`]). A directory without
/// any `*.json` entry is an error, as is a path that does not exist.
pub fn json_files_deep(paths: &[PathBuf]) -> Result<Found, FilesError> {
    let mut found = Found::default();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| FilesError::Missing {
            path: p.clone(),
            why: crate::explain_io_error(&e),
        })?;
        if meta.is_dir() {
            let before = (found.files.len(), found.unreadable.len());
            walk(p, &mut found, true)?;
            if (found.files.len(), found.unreadable.len()) == before {
                return Err(FilesError::NoJson { dir: p.clone() });
            }
        } else {
            found.files.push(p.clone());
        }
    }
    found.files.sort();
    found.files.dedup();
    found.others.sort();
    found.others.dedup();
    Ok(found)
}

/// Every file named, and the `*.json` files directly in every directory named (each directory's sorted),
/// in the order given. Unreadable directory entries are skipped.
pub fn json_files_flat(paths: &[PathBuf]) -> Result<Vec<PathBuf>, FilesError> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut v = json_in_dir(p)?;
            v.sort();
            files.extend(v);
        } else {
            files.push(p.clone());
        }
    }
    Ok(files)
}

/// The `*.json` files directly in `dir` (hidden ones skipped), in directory order; unreadable entries are
/// skipped.
pub fn json_in_dir(dir: &Path) -> Result<Vec<PathBuf>, FilesError> {
    Ok(std::fs::read_dir(dir)
        .map_err(|err| FilesError::ListDir {
            dir: dir.to_path_buf(),
            err,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|f| f.extension().and_then(|x| x.to_str()) == Some("json"))
        // Hidden files (an editor's, a half-written temp file) are skipped, as the deep walk does.
        .filter(|f| {
            !f.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
        })
        .collect())
}

/// Reads one file as text and parses it with `parse` (a result document: `results::Document::from_text`);
/// a parse error becomes [`FilesError::Parse`] naming the path.
pub fn load<T, E: std::fmt::Display>(
    path: &Path,
    parse: impl FnOnce(&str) -> Result<T, E>,
) -> Result<T, FilesError> {
    let bytes = super::read_regular(path).map_err(|err| FilesError::Read {
        path: path.to_path_buf(),
        err,
    })?;
    let text = String::from_utf8(bytes).map_err(|_| FilesError::NotText {
        path: path.to_path_buf(),
    })?;
    parse(&text).map_err(|e| FilesError::Parse {
        path: path.to_path_buf(),
        why: e.to_string(),
    })
}

/// Reads every file and hands `(name, text or the explained read error)` to `f`, spreading the files over
/// the available CPUs (one thread per 64 files at most); the results come back in the order of `paths`.
pub fn read_all<T: Send>(
    paths: &[PathBuf],
    f: impl Fn(String, Result<String, Unreadable>) -> T + Sync,
) -> Vec<T> {
    let threads = (crate::cpus::usable() as usize).min(paths.len().div_ceil(64).max(1));
    let next = AtomicUsize::new(0);
    let one = |p: &PathBuf| {
        // Only a regular file is read: a FIFO named `x.json` hung the reader (issue 29).
        let text = super::read_regular(p)
            .and_then(|b| {
                String::from_utf8(b).map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text")
                })
            })
            .map_err(|err| Unreadable { err });
        f(p.display().to_string(), text)
    };
    let parts: Vec<Vec<(usize, T)>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut got = Vec::new();
                    loop {
                        // Relaxed: the counter only hands out distinct indices; results are joined below.
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(p) = paths.get(i) else { break };
                        got.push((i, one(p)));
                    }
                    got
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a file reader panicked"))
            .collect()
    });
    let mut all: Vec<(usize, T)> = parts.into_iter().flatten().collect();
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, t)| t).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_json_files_and_keeps_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b.json"), "2").unwrap();
        std::fs::write(dir.path().join("a.json"), "1").unwrap();
        std::fs::write(dir.path().join(".hidden.json"), "x").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let got = json_files_deep(&[dir.path().to_path_buf()]).unwrap().files;
        assert_eq!(
            got,
            vec![dir.path().join("a.json"), dir.path().join("sub/b.json")]
        );
        assert_eq!(
            json_files_flat(&[dir.path().to_path_buf()]).unwrap().len(),
            1
        );
        let texts = read_all(&got, |_, t| t.unwrap());
        assert_eq!(texts, vec!["1", "2"]);
        let empty = dir.path().join("sub2");
        std::fs::create_dir(&empty).unwrap();
        assert!(matches!(
            json_files_deep(&[empty]),
            Err(FilesError::NoJson { .. })
        ));
    }

    /// Regression (issue 29): a FIFO named `x.json` hung `fleet` and `results`; an unreadable entry under a
    /// directory was fatal. The FIFO is listed as skipped (and refused at once when named or read), the
    /// walk goes on.
    #[test]
    fn a_fifo_named_json_is_listed_not_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/a.json"), "1").unwrap();
        let fifo = dir.path().join("x.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path in this test's own temp dir.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let found = json_files_deep(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(found.files, vec![dir.path().join("sub/a.json")]);
        assert_eq!(
            found.unreadable,
            vec![(fifo.clone(), "a FIFO, not a regular file: skipped".into())]
        );
        // Named on the command line, or found by the flat listing: read without hanging, refused.
        let named = json_files_deep(std::slice::from_ref(&fifo)).unwrap();
        let texts = read_all(&named.files, |_, t| t.map_err(|e| e.to_string()));
        assert_eq!(
            texts,
            vec![Err("a FIFO, not a regular file: not read".to_string())]
        );
        assert!(load(&fifo, |t| Ok::<_, String>(t.len())).is_err());
        assert_eq!(
            json_files_flat(&[dir.path().to_path_buf()]).unwrap(),
            vec![fifo]
        );
    }
}
