//! PostgreSQL builds in the guest: `bench pg --pg-bin` may name builds under scripts/pg-build's cache
//! (`/var/cache/preemptlab/pg`, docs/pg-builds.md), which the guest does not see unless their directories
//! are shared into it (read-only, beside the kernel's). The guest's root is the host's, so builds under
//! /usr (Debian's own PostgreSQL) need nothing.

use std::path::{Path, PathBuf};

/// The directories of the PostgreSQL builds a `bench pg --pg-bin` command names, for the guest to see (pure;
/// `cache` is scripts/pg-build's cache): a build named by its cache name is `cache/NAME` (its `bin/`, `lib/`,
/// `share/` and manifest), one named by its bin directory is that directory's parent. Under /usr nothing
/// is needed: the guest has the host's /usr.
pub fn pg_build_dirs(command: &[String], cache: &Path) -> Vec<PathBuf> {
    if command.len() < 2 || command[0] != "bench" || command[1] != "pg" {
        return Vec::new();
    }
    let mut given = Vec::new();
    let mut words = command.iter().skip(2).take_while(|w| *w != "--");
    while let Some(w) = words.next() {
        if w == "--pg-bin" {
            given.extend(words.next().cloned());
        } else if let Some(v) = w.strip_prefix("--pg-bin=") {
            given.push(v.to_string());
        }
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for name in given.iter().flat_map(|g| g.split(',')).map(str::trim) {
        let dir = match name {
            "" => continue,
            n if n.contains('/') => match Path::new(n).parent() {
                Some(p) => p.to_path_buf(),
                None => continue,
            },
            n => cache.join(n),
        };
        if !dir.starts_with("/usr") && !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn pg_builds_named_by_a_bench_pg_command_are_handed_in() {
        let cache = Path::new("/c/pg");
        let cmd = s(&[
            "bench",
            "pg",
            "--duration",
            "2s",
            "--pg-bin",
            "/usr/lib/postgresql/15/bin,18+rseq-spinlock,/opt/pg/19/bin",
            "--pg-bin=18",
        ]);
        assert_eq!(
            pg_build_dirs(&cmd, cache),
            vec![
                PathBuf::from("/c/pg/18+rseq-spinlock"),
                PathBuf::from("/opt/pg/19"),
                PathBuf::from("/c/pg/18"),
            ]
        );
        // Other commands, and words after `--`, name no build.
        assert!(pg_build_dirs(&s(&["bench", "lock", "--pg-bin", "18"]), cache).is_empty());
        assert!(pg_build_dirs(&s(&["bench", "pg", "--", "--pg-bin", "18"]), cache).is_empty());
        assert!(pg_build_dirs(&s(&["bench", "pg", "--pg-bin"]), cache).is_empty());
    }
}
