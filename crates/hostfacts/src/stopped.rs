//! Sizing the huge-page pool of a stopped PostgreSQL server from its data directory: `postgres -D DIR -C
//! shared_memory_size` (and `huge_page_size`, `shared_memory_size_in_huge_pages`), run as the directory's
//! owner. These runtime-computed settings exist from PostgreSQL 15 and need the server stopped
//! (docs/references.md#huge-pages-pg).
//!
//! The directory given may be a data directory holding its own `postgresql.conf` (what initdb makes), a
//! data directory whose configuration lives elsewhere (Debian's layout: configuration in
//! `/etc/postgresql/VERSION/CLUSTER`, data in `/var/lib/postgresql/VERSION/CLUSTER`, tied by `data_directory`
//! in that `postgresql.conf`; postgresql-common's pg_createcluster), or such a configuration directory.
//! `postgres -D` then gets the configuration directory: PostgreSQL reads `data_directory` from it.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::parse;
use results::host::hugepages::Basis;

/// Why a stopped server could not be sized.
#[derive(Debug, thiserror::Error)]
pub enum StoppedError {
    /// The directory is not a data directory.
    #[error("{}: not a PostgreSQL data directory (no PG_VERSION file); give the directory initdb made, the one holding postgresql.conf or PG_VERSION", .dir.display())]
    NotDataDir {
        /// The directory given.
        dir: PathBuf,
    },
    /// A configuration directory whose `data_directory` is no data directory.
    #[error("{}: its postgresql.conf names data_directory {}, which is not a PostgreSQL data directory (no PG_VERSION file)", .dir.display(), .data.display())]
    BadDataDirectory {
        /// The configuration directory given.
        dir: PathBuf,
        /// What its `data_directory` says.
        data: PathBuf,
    },
    /// A data directory without `postgresql.conf`, and no configuration elsewhere names it.
    #[error("{}: a data directory without postgresql.conf, and no {}/*/*/postgresql.conf names it as its data_directory; give the directory that holds its postgresql.conf", .dir.display(), .etc.display())]
    NoConfig {
        /// The data directory given.
        dir: PathBuf,
        /// Where configurations were looked for.
        etc: PathBuf,
    },
    /// The directory cannot be read.
    #[error("{}: {source}", .dir.display())]
    Unreadable {
        /// The directory given.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Root owns the directory, and PostgreSQL does not run as root.
    #[error("{}: owned by root; PostgreSQL refuses to run as root (chown it to the postgres user)", .dir.display())]
    OwnedByRoot {
        /// The directory given.
        dir: PathBuf,
    },
    /// No PostgreSQL binaries of the directory's version.
    #[error(transparent)]
    NoBinaries(#[from] crate::pgbin::PgBinError),
    /// The server predates the runtime-computed settings.
    #[error("PostgreSQL {major} cannot report shared_memory_size (15+ only)")]
    TooOld {
        /// Its major version.
        major: u32,
    },
    /// `postgres` could not be started.
    #[error("running {}: {source}", .bin.display())]
    Spawn {
        /// The binary.
        bin: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `postgres -C` failed (a running server, a broken configuration); its message
    /// ([`postgres_error_line`]).
    #[error("postgres -D {} -C {setting} failed: {stderr}", .dir.display())]
    Failed {
        /// The data directory.
        dir: PathBuf,
        /// The setting asked for.
        setting: String,
        /// What postgres said.
        stderr: String,
    },
    /// A setting's value is not what it should be.
    #[error("{setting} {value:?}: {reason}")]
    BadValue {
        /// The setting.
        setting: String,
        /// Its value.
        value: String,
        /// Why it does not parse.
        reason: String,
    },
}

/// Where Debian's postgresql-common keeps the clusters' configuration directories.
pub const DEBIAN_ETC: &str = "/etc/postgresql";

/// A stopped server's directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The directory `postgres -D` gets: the one holding `postgresql.conf`.
    pub config_dir: PathBuf,
    /// The data directory (`PG_VERSION`).
    pub data_dir: PathBuf,
}

/// `data_directory` of the `postgresql.conf` in `config_dir`, if it sets one.
fn data_directory(config_dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(config_dir.join("postgresql.conf")).ok()?;
    parse::pg_conf(&text)
        .get("data_directory")
        .filter(|d| !d.is_empty())
        .map(|d| config_dir.join(d))
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The directories of the stopped server that `dir` names (see the module doc): configurations that are
/// not in the data directory are looked for in `etc/*/*/` (Debian: [`DEBIAN_ETC`]).
pub fn layout(dir: &Path, etc: &Path) -> Result<Layout, StoppedError> {
    let is_data = |d: &Path| d.is_dir() && d.join("PG_VERSION").is_file();
    let has_conf = dir.join("postgresql.conf").is_file();
    if is_data(dir) {
        if has_conf {
            return Ok(Layout {
                config_dir: dir.to_path_buf(),
                data_dir: dir.to_path_buf(),
            });
        }
        // Debian's own place first (etc/VERSION/CLUSTER for data .../VERSION/CLUSTER), then any cluster.
        let mut candidates: Vec<PathBuf> = Vec::new();
        let names: Vec<&std::ffi::OsStr> = dir.iter().collect();
        if let [.., v, c] = names.as_slice() {
            candidates.push(etc.join(v).join(c));
        }
        if let Ok(versions) = std::fs::read_dir(etc) {
            for v in versions.filter_map(|e| e.ok()) {
                if let Ok(clusters) = std::fs::read_dir(v.path()) {
                    candidates.extend(clusters.filter_map(|e| e.ok()).map(|e| e.path()));
                }
            }
        }
        return candidates
            .into_iter()
            .find(|c| data_directory(c).is_some_and(|d| same_dir(&d, dir)))
            .map(|config_dir| Layout {
                config_dir,
                data_dir: dir.to_path_buf(),
            })
            .ok_or_else(|| StoppedError::NoConfig {
                dir: dir.to_path_buf(),
                etc: etc.to_path_buf(),
            });
    }
    if has_conf {
        if let Some(data) = data_directory(dir) {
            if !is_data(&data) {
                return Err(StoppedError::BadDataDirectory {
                    dir: dir.to_path_buf(),
                    data,
                });
            }
            return Ok(Layout {
                config_dir: dir.to_path_buf(),
                data_dir: data,
            });
        }
    }
    Err(StoppedError::NotDataDir {
        dir: dir.to_path_buf(),
    })
}

/// Runs `postgres -D dir -C name` as the owner of the data directory `data` (`dir` itself, or the one its
/// `postgresql.conf` names), returning the value.
pub fn postgres_c(bin: &Path, dir: &Path, data: &Path, name: &str) -> Result<String, StoppedError> {
    let meta = std::fs::metadata(data).map_err(|source| StoppedError::Unreadable {
        dir: data.to_path_buf(),
        source,
    })?;
    let exe = bin.join("postgres");
    let mut cmd = Command::new(&exe);
    cmd.arg("-D").arg(dir).arg("-C").arg(name);
    if osutil::is_root() {
        if meta.uid() == 0 {
            return Err(StoppedError::OwnedByRoot {
                dir: data.to_path_buf(),
            });
        }
        cmd.uid(meta.uid()).gid(meta.gid());
    }
    let out = cmd
        .output()
        .map_err(|source| StoppedError::Spawn { bin: exe, source })?;
    if !out.status.success() {
        return Err(StoppedError::Failed {
            dir: dir.to_path_buf(),
            setting: name.to_string(),
            stderr: postgres_error_line(&String::from_utf8_lossy(&out.stderr)),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// PostgreSQL's error on stderr as one line: its FATAL, ERROR or PANIC messages with their DETAIL and HINT,
/// without the log line prefix (`2026-11-29 07:05:07.058 UTC [31542] `) or the LOG lines around them,
/// joined with `; `. All of it, trimmed and joined, when no such line is there.
pub fn postgres_error_line(stderr: &str) -> String {
    const LEVELS: [&str; 6] = ["FATAL:", "ERROR:", "PANIC:", "DETAIL:", "HINT:", "CONTEXT:"];
    let kept: Vec<String> = stderr
        .lines()
        .filter_map(|l| {
            LEVELS.iter().find_map(|lv| {
                let i = l.find(lv)?;
                let msg = l[i + lv.len()..].trim();
                Some(match *lv {
                    "FATAL:" | "ERROR:" | "PANIC:" => msg.to_string(),
                    _ => msg.trim_end_matches('.').to_string(),
                })
            })
        })
        .filter(|m| !m.is_empty())
        .collect();
    if kept.is_empty() {
        return stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    kept.join("; ")
}

/// What fixes a failed `postgres -C`, read from its message: a running server (its lock file), a data
/// directory's permissions; None when the message names no cause this knows.
pub fn postgres_error_fix(message: &str, dir: &Path) -> Option<String> {
    if message.contains("lock file") && message.contains("already exists") {
        Some("the server runs: runtime-computed settings need it stopped; for a running one use --pg or --pid".into())
    } else if message.contains("has invalid permissions") {
        Some(format!(
            "chmod 0700 {}: PostgreSQL refuses a data directory others can read or write",
            dir.display()
        ))
    } else {
        None
    }
}

/// The sizing basis of the stopped server in `dir` for pages of `page_kib` (`default_kib`: the kernel's
/// default huge page size, which `huge_page_size = 0` means). `pg_bin`: the binaries to use, else found by
/// the directory's version.
pub fn basis_for_data_dir(
    pg_bin: Option<&Path>,
    dir: &Path,
    page_kib: u64,
    default_kib: u64,
) -> Result<Basis, StoppedError> {
    basis_for_layout(
        pg_bin,
        &layout(dir, Path::new(DEBIAN_ETC))?,
        page_kib,
        default_kib,
    )
}

/// [`basis_for_data_dir`] for a server's directories.
pub fn basis_for_layout(
    pg_bin: Option<&Path>,
    layout: &Layout,
    page_kib: u64,
    default_kib: u64,
) -> Result<Basis, StoppedError> {
    let (dir, data) = (layout.config_dir.as_path(), layout.data_dir.as_path());
    let version = std::fs::read_to_string(data.join("PG_VERSION"))
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok());
    let bin = crate::pgbin::find(pg_bin, version).map_err(StoppedError::NoBinaries)?;
    if let Some(major) = bin.major.filter(|&m| m < 15) {
        return Err(StoppedError::TooOld { major });
    }
    let size = postgres_c(&bin.dir, dir, data, "shared_memory_size")?;
    let size_kib = shared_memory_size_kib(&size)?;
    let hps = postgres_c(&bin.dir, dir, data, "huge_page_size")?;
    let hps_kib = if hps == "0" {
        default_kib
    } else {
        results::host::bytes::size(&hps)
            .map(|b| b.kib())
            .unwrap_or(default_kib)
    };
    let how = format!(
        "{} -D {} -C",
        bin.dir.join("postgres").display(),
        dir.display()
    );
    if hps_kib == page_kib {
        let setting = "shared_memory_size_in_huge_pages";
        let value = postgres_c(&bin.dir, dir, data, setting)?;
        let pages: i64 =
            value
                .parse()
                .map_err(|e: std::num::ParseIntError| StoppedError::BadValue {
                    setting: setting.into(),
                    value: value.clone(),
                    reason: e.to_string(),
                })?;
        if pages > 0 {
            return Ok(Basis::Postgres {
                pages: pages as u64,
                shared_memory_kib: Some(size_kib),
                how,
            });
        }
    }
    Ok(Basis::PostgresSize {
        shared_memory_kib: size_kib,
        how,
    })
}

/// `postgres -C shared_memory_size` in kB: a bare number is in the setting's unit, MB (PostgreSQL 15
/// prints `2125` for 2,125 MB: read as bytes it was the arithmetic line's "shared_memory_size = 2.00 KiB",
/// issue 46 item 3); a number with a unit is read as given.
pub fn shared_memory_size_kib(value: &str) -> Result<u64, StoppedError> {
    let bad = |reason: String| StoppedError::BadValue {
        setting: "shared_memory_size".into(),
        value: value.to_string(),
        reason,
    };
    let v = value.trim();
    if !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()) {
        return results::host::bytes::pg_memory(v, Some("MB"))
            .map(|b| b.kib())
            .map_err(|e| bad(e.to_string()));
    }
    results::host::bytes::size(v)
        .map(|b| b.kib())
        .map_err(|e| bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// Regression (issue 25): `hugepages --data-dir` did not read Debian's layout, configuration in
    /// /etc/postgresql/VERSION/CLUSTER and data in /var/lib/postgresql/VERSION/CLUSTER.
    #[test]
    fn debian_layout_from_either_directory() {
        let root = tempfile::tempdir().unwrap();
        let (etc, data) = (
            root.path().join("etc/postgresql"),
            root.path().join("var/lib/postgresql/15/main"),
        );
        put(&data.join("PG_VERSION"), "15\n");
        put(
            &etc.join("15/main/postgresql.conf"),
            &format!(
                "data_directory = '{}'\t\t# use data in another directory\nshared_buffers = 128MB\n",
                data.display()
            ),
        );
        let want = Layout {
            config_dir: etc.join("15/main"),
            data_dir: data.clone(),
        };
        assert_eq!(
            layout(&data, &etc).unwrap(),
            want,
            "the data directory given"
        );
        assert_eq!(
            layout(&etc.join("15/main"), &etc).unwrap(),
            want,
            "the configuration directory given"
        );
        // A cluster of another name is found by its data_directory.
        let other = root.path().join("srv/pg-data");
        put(&other.join("PG_VERSION"), "15\n");
        put(
            &etc.join("15/reports/postgresql.conf"),
            &format!("data_directory = '{}'\n", other.display()),
        );
        assert_eq!(
            layout(&other, &etc).unwrap().config_dir,
            etc.join("15/reports")
        );
        // initdb's layout: the configuration in the data directory.
        let plain = root.path().join("plain");
        put(&plain.join("PG_VERSION"), "15\n");
        put(&plain.join("postgresql.conf"), "");
        assert_eq!(layout(&plain, &etc).unwrap().config_dir, plain);
    }

    #[test]
    fn a_layout_that_does_not_hold_together_says_why() {
        let root = tempfile::tempdir().unwrap();
        let etc = root.path().join("etc");
        let lone = root.path().join("lone/15/main");
        put(&lone.join("PG_VERSION"), "15\n");
        let e = layout(&lone, &etc).unwrap_err();
        assert!(matches!(e, StoppedError::NoConfig { .. }), "{e}");
        assert!(e
            .to_string()
            .contains("give the directory that holds its postgresql.conf"));
        let conf = root.path().join("conf");
        put(
            &conf.join("postgresql.conf"),
            "data_directory = '/nonexistent/x'\n",
        );
        let e = layout(&conf, &etc).unwrap_err();
        assert!(matches!(e, StoppedError::BadDataDirectory { .. }), "{e}");
        let e = layout(root.path(), &etc).unwrap_err();
        assert!(matches!(e, StoppedError::NotDataDir { .. }), "{e}");
    }
}

#[cfg(test)]
mod issue_46 {
    use super::*;

    /// Regression (issue 46 item 3): PostgreSQL 15's `postgres -C shared_memory_size` prints `2125`, in MB
    /// (seen here for shared_buffers 2GB and 200 connections); it was read as 2,125 bytes.
    #[test]
    fn shared_memory_size_read_as_bytes_regression() {
        assert_eq!(shared_memory_size_kib("2125").unwrap(), 2125 * 1024);
        assert_eq!(shared_memory_size_kib("2125MB\n").unwrap(), 2125 * 1024);
        assert!(shared_memory_size_kib("lots").is_err());
    }

    /// Regression (issue 46 item 3): postgres's own log lines (2-3 lines, with their timestamps) made the
    /// message, and a hint about running servers followed a permissions error. One line, its fix.
    #[test]
    fn postgres_errors_in_several_lines_with_a_hint_pointing_away_regression() {
        let stderr = "2026-11-29 07:05:07.058 UTC [31542] FATAL:  data directory \"/tmp/d\" has invalid permissions\n\
                      2026-11-29 07:05:07.058 UTC [31542] DETAIL:  Permissions should be u=rwx (0700) or u=rwx,g=rx (0750).\n";
        let line = postgres_error_line(stderr);
        assert_eq!(
            line,
            "data directory \"/tmp/d\" has invalid permissions; Permissions should be u=rwx (0700) or u=rwx,g=rx (0750)"
        );
        let fix = postgres_error_fix(&line, Path::new("/tmp/d")).unwrap();
        assert!(fix.starts_with("chmod 0700 /tmp/d"), "{fix}");
        let running = "2026-11-29 07:10:00.000 UTC [1] LOG:  starting\n2026-11-29 07:10:00.001 UTC [1] FATAL:  lock file \"postmaster.pid\" already exists\n2026-11-29 07:10:00.001 UTC [1] HINT:  Is another postmaster (PID 77) running in data directory \"/tmp/d\"?\n";
        let line = postgres_error_line(running);
        assert!(!line.contains("LOG") && !line.contains('\n'), "{line}");
        assert!(postgres_error_fix(&line, Path::new("/tmp/d"))
            .unwrap()
            .contains("--pg or --pid"));
        assert_eq!(postgres_error_line("something\nelse\n"), "something else");
    }
}
