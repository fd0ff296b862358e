//! Sizing the huge-page pool of a stopped PostgreSQL server from its data directory: `postgres -D DIR -C
//! shared_memory_size` (and `huge_page_size`, `shared_memory_size_in_huge_pages`), run as the directory's
//! owner. These runtime-computed settings exist from PostgreSQL 15 and need the server stopped
//! (docs/references.md#huge-pages-pg).

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::hugepages::Basis;
use crate::parse;

/// Why a stopped server could not be sized.
#[derive(Debug, thiserror::Error)]
pub enum StoppedError {
    /// The directory is not a data directory.
    #[error("{}: not a PostgreSQL data directory (no PG_VERSION file); give the directory initdb made, the one holding postgresql.conf or PG_VERSION", .dir.display())]
    NotDataDir {
        /// The directory given.
        dir: PathBuf,
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
    /// `postgres -C` failed (a running server, a broken configuration); its stderr.
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

/// Runs `postgres -D dir -C name` as the owner of `dir`, returning the value.
pub fn postgres_c(bin: &Path, dir: &Path, name: &str) -> Result<String, StoppedError> {
    let meta = std::fs::metadata(dir).map_err(|source| StoppedError::Unreadable {
        dir: dir.to_path_buf(),
        source,
    })?;
    let exe = bin.join("postgres");
    let mut cmd = Command::new(&exe);
    cmd.arg("-D").arg(dir).arg("-C").arg(name);
    if osutil::is_root() {
        if meta.uid() == 0 {
            return Err(StoppedError::OwnedByRoot {
                dir: dir.to_path_buf(),
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
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
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
    if !dir.is_dir() || !dir.join("PG_VERSION").is_file() {
        return Err(StoppedError::NotDataDir {
            dir: dir.to_path_buf(),
        });
    }
    let version = std::fs::read_to_string(dir.join("PG_VERSION"))
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok());
    let bin = crate::pgbin::find(pg_bin, version).map_err(StoppedError::NoBinaries)?;
    if let Some(major) = bin.major.filter(|&m| m < 15) {
        return Err(StoppedError::TooOld { major });
    }
    let size = postgres_c(&bin.dir, dir, "shared_memory_size")?;
    let size_kib = parse::size(&size)
        .map_err(|e| StoppedError::BadValue {
            setting: "shared_memory_size".into(),
            value: size.clone(),
            reason: e.to_string(),
        })?
        .kib();
    let hps = postgres_c(&bin.dir, dir, "huge_page_size")?;
    let hps_kib = if hps == "0" {
        default_kib
    } else {
        parse::size(&hps).map(|b| b.kib()).unwrap_or(default_kib)
    };
    let how = format!(
        "{} -D {} -C",
        bin.dir.join("postgres").display(),
        dir.display()
    );
    if hps_kib == page_kib {
        let setting = "shared_memory_size_in_huge_pages";
        let value = postgres_c(&bin.dir, dir, setting)?;
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
