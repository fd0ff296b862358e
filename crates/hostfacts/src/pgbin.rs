//! Finding PostgreSQL's binaries: `--pg-bin DIR`, `pg_config --bindir`, `/usr/lib/postgresql/*/bin`.

use std::path::{Path, PathBuf};
use std::process::Command;

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
    "install PostgreSQL's server: apt-get install postgresql-15 (Debian), or pass --pg-bin DIR";

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
pub fn find(explicit: Option<&Path>, wanted_major: Option<u32>) -> Result<BinDir, String> {
    if let Some(d) = explicit {
        if d.join("postgres").is_file() {
            return Ok(BinDir {
                dir: d.to_path_buf(),
                major: major_of(d),
            });
        }
        return Err(format!(
            "--pg-bin {}: no postgres binary there",
            d.display()
        ));
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut dirs: Vec<(u32, PathBuf)> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.parse::<u32>().ok())
                    .map(|v| (v, e.path().join("bin")))
            })
            .collect();
        dirs.sort();
        dirs.reverse();
        if let Some(w) = wanted_major {
            dirs.sort_by_key(|(v, _)| *v != w);
        }
        candidates.extend(dirs.into_iter().map(|(_, p)| p));
    }
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
    Err(format!("no PostgreSQL server binaries found (looked in /usr/lib/postgresql/*/bin and pg_config --bindir): {INSTALL_HINT}"))
}
