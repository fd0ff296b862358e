//! Finding PostgreSQL's binaries (a directory the caller names, `pg_config --bindir`,
//! `/usr/lib/postgresql/*/bin`) and asking them what they know: `postgres --describe-config` lists every
//! server setting the build has (one per line, the name first, tab-separated; PostgreSQL's
//! `src/backend/utils/misc/help_config.c`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Why no binaries, or no answer from them.
#[derive(Debug, thiserror::Error)]
pub enum PgBinError {
    /// The directory the caller named has no `postgres`.
    #[error("{}: no postgres binary there", .dir.display())]
    NotThere {
        /// The directory named.
        dir: PathBuf,
    },
    /// None found in the usual places.
    #[error("no PostgreSQL server binaries found (looked in /usr/lib/postgresql/*/bin and pg_config --bindir): {INSTALL_HINT}")]
    NotFound,
    /// `postgres --describe-config` could not run or failed.
    #[error("{} --describe-config failed: {why}", .bin.display())]
    DescribeConfig {
        /// The binary.
        bin: PathBuf,
        /// Its error or stderr.
        why: String,
    },
}

/// Where a binary directory was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinDir {
    /// The directory holding `postgres`, `initdb`, `pg_ctl`, `pgbench`.
    pub dir: PathBuf,
    /// The major version, if the path or `postgres --version` says.
    pub major: Option<u32>,
}

/// The Debian package to suggest when nothing is found.
pub const INSTALL_HINT: &str =
    "install PostgreSQL's server: apt-get install postgresql-15 (Debian), or name the directory of its binaries";

fn major_of(dir: &Path) -> Option<u32> {
    let out = Command::new(dir.join("postgres"))
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
    text.split_whitespace()
        .find_map(|w| w.split('.').next().and_then(|m| m.parse().ok()))
}

/// Finds a binary directory holding `postgres`. `wanted_major` prefers that version.
pub fn find(explicit: Option<&Path>, wanted_major: Option<u32>) -> Result<BinDir, PgBinError> {
    if let Some(d) = explicit {
        if d.join("postgres").is_file() {
            return Ok(BinDir {
                dir: d.to_path_buf(),
                major: major_of(d),
            });
        }
        return Err(PgBinError::NotThere {
            dir: d.to_path_buf(),
        });
    }
    let mut candidates: Vec<PathBuf> = installed(Path::new("/"), wanted_major);
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        if out.status.success() {
            candidates.push(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
        }
    }
    for c in candidates {
        if c.join("postgres").is_file() {
            let major = major_of(&c);
            return Ok(BinDir { dir: c, major });
        }
    }
    Err(PgBinError::NotFound)
}

/// The version-numbered installations under `root`, newest first (`wanted` first when given): Debian's
/// and Ubuntu's `/usr/lib/postgresql/N/bin`, and the PGDG RPMs' `/usr/pgsql-N/bin` (RHEL, Rocky, Alma,
/// Fedora with the community repository).
fn installed(root: &Path, wanted: Option<u32>) -> Vec<PathBuf> {
    let mut dirs: Vec<(u32, PathBuf)> = Vec::new();
    if let Ok(rd) = std::fs::read_dir(root.join("usr/lib/postgresql")) {
        dirs.extend(rd.filter_map(|e| e.ok()).filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            Some((v, e.path().join("bin")))
        }));
    }
    if let Ok(rd) = std::fs::read_dir(root.join("usr")) {
        dirs.extend(rd.filter_map(|e| e.ok()).filter_map(|e| {
            let v = e
                .file_name()
                .to_str()?
                .strip_prefix("pgsql-")?
                .parse::<u32>()
                .ok()?;
            Some((v, e.path().join("bin")))
        }));
    }
    dirs.sort();
    dirs.reverse();
    if let Some(w) = wanted {
        dirs.sort_by_key(|(v, _)| *v != w);
    }
    dirs.into_iter().map(|(_, p)| p).collect()
}

/// The setting names in `postgres --describe-config` output: the first tab-separated column, lower-case
/// (PostgreSQL matches names case-insensitively).
pub fn parse_setting_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.split('\t').next())
        .map(|n| n.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty())
        .collect()
}

impl BinDir {
    /// Every server setting this build of PostgreSQL knows, from `postgres --describe-config`.
    pub fn setting_names(&self) -> Result<BTreeSet<String>, PgBinError> {
        let bin = self.dir.join("postgres");
        let fail = |why: String| PgBinError::DescribeConfig {
            bin: bin.clone(),
            why,
        };
        let out = Command::new(&bin)
            .arg("--describe-config")
            .output()
            .map_err(|e| fail(e.to_string()))?;
        if !out.status.success() {
            return Err(fail(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
        let names = parse_setting_names(&String::from_utf8_lossy(&out.stdout));
        if names.is_empty() {
            return Err(fail("it listed no settings".into()));
        }
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debian's and the PGDG RPMs' layouts both, newest first, the wanted version first.
    #[test]
    fn debian_and_pgdg_layouts() {
        let root = tempfile::tempdir().unwrap();
        for d in [
            "usr/lib/postgresql/15/bin",
            "usr/pgsql-17/bin",
            "usr/pgsql-13/bin",
            "usr/pgsql-x/bin",
        ] {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
        }
        let rel = |v: Vec<PathBuf>| -> Vec<String> {
            v.iter()
                .map(|p| p.strip_prefix(root.path()).unwrap().display().to_string())
                .collect()
        };
        assert_eq!(
            rel(installed(root.path(), None)),
            [
                "usr/pgsql-17/bin",
                "usr/lib/postgresql/15/bin",
                "usr/pgsql-13/bin"
            ]
        );
        assert_eq!(
            rel(installed(root.path(), Some(15)))[0],
            "usr/lib/postgresql/15/bin"
        );
    }

    #[test]
    fn setting_names_are_the_first_column_lower_case() {
        let text = "archive_command\tsighup\tWrite-Ahead Log / Archiving\tSTRING\t\t\t\tSets it.\t\n\
                    Work_Mem\tuser\tResource Usage / Memory\tINTEGER\t4096\t64\t2147483647\tSets it.\t\n";
        let names = parse_setting_names(text);
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            ["archive_command", "work_mem"]
        );
    }
}
