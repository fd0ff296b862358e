//! The builds axis of `bench pg`: the PostgreSQL builds `--pg-bin` names, found and described once at the
//! edge, and the rseq counters of builds with the `rseq-spinlock` patch.
//!
//! A build is named by its bin directory, or by its name in the cache of `scripts/pg-build`
//! (`${PREEMPTLAB_PG_CACHE:-/var/cache/preemptlab/pg}/NAME/bin`: `18`, `18+rseq-spinlock`; see
//! `osutil::pg_build_cache`). What it is comes
//! from the manifest scripts/pg-build writes next to `bin/` (`preemptlab-build.json`: version, configure
//! flags, patches with their sha256, source package; docs/pg-builds.md), else from the binaries themselves
//! (`postgres --version`, `pg_config --configure`).
//!
//! The rseq-spinlock patch (patches/rseq-spinlock/README.md) gives the server a read-only setting,
//! `rseq_slice.counters`: `enabled=on processes=N requests=N grants=N yields=N cleared=N` (totals over the
//! server processes that have exited, plus the asking session), or `enabled=off why="..."`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use hostfacts::pgbin::{self, BinDir};
use results::pg::{Build, BuildPatch, RseqSlice, Spec};
use serde::Deserialize;

use crate::options::OptionError;
use pgharness::pgcluster::Cluster;

/// The manifest file scripts/pg-build writes next to a build's `bin/`.
pub const MANIFEST: &str = "preemptlab-build.json";

/// The build cache directory (`osutil::pg_build_cache`).
pub fn cache_dir() -> PathBuf {
    osutil::pg_build_cache()
}

/// A build found: the name it was given by and its binaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The name as given (a cache name or the directory).
    pub name: String,
    /// Its binaries.
    pub bin: BinDir,
}

/// The builds a comma-separated `--pg-bin` names, in order; none given: the usual places (one build).
/// A word with a `/` is a directory; any other word is a build of scripts/pg-build in `cache`.
pub fn find(given: Option<&str>, cache: &Path) -> Result<Vec<Found>, OptionError> {
    let Some(given) = given else {
        let bin = pgbin::find(None, None).map_err(|source| OptionError::PgBin {
            option: "pg_bin",
            source,
        })?;
        return Ok(vec![Found {
            name: bin.dir.display().to_string(),
            bin,
        }]);
    };
    let words: Vec<&str> = given
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .collect();
    if words.is_empty() {
        return Err(OptionError::Empty {
            options: &["pg_bin"],
        });
    }
    let mut out: Vec<Found> = Vec::new();
    for w in words {
        if out.iter().any(|f| f.name == w) {
            return Err(invalid(w, "named twice; each build once"));
        }
        let dir = if w.contains('/') {
            PathBuf::from(w)
        } else {
            cache.join(w).join("bin")
        };
        let bin = pgbin::find(Some(&dir), None).map_err(|_| {
            if w.contains('/') {
                invalid(
                    w,
                    "no postgres binary there; name a PostgreSQL bin directory",
                )
            } else {
                invalid(w, not_cached(w, cache))
            }
        })?;
        out.push(Found {
            name: w.to_string(),
            bin,
        });
    }
    Ok(out)
}

fn invalid(value: &str, why: impl Into<String>) -> OptionError {
    OptionError::Invalid {
        option: "pg_bin",
        value: value.into(),
        why: why.into(),
    }
}

/// Why a cache name is not a build: the builds there and the command that makes this one.
fn not_cached(name: &str, cache: &Path) -> String {
    let mut have: Vec<String> = std::fs::read_dir(cache)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("bin/postgres").is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    have.sort();
    let (version, patches) = name.split_once('+').unwrap_or((name, ""));
    let make = std::iter::once(format!("scripts/pg-build {version}"))
        .chain(
            patches
                .split('+')
                .filter(|p| !p.is_empty())
                .map(|p| format!("--patch {p}")),
        )
        .collect::<Vec<_>>()
        .join(" ");
    let have = match have.is_empty() {
        true => "none".to_string(),
        false => have.join(", "),
    };
    format!(
        "no such build in {} (it has: {have}); make it with {make}, or name a bin directory",
        cache.display()
    )
}

/// The part of scripts/pg-build's manifest a result records.
#[derive(Debug, Deserialize)]
struct Manifest {
    configure: Option<String>,
    #[serde(default)]
    patches: Vec<BuildPatch>,
    source_package: Option<String>,
    debian_version: Option<String>,
    debian_patches_applied: Option<bool>,
}

/// What a build is: from its manifest when scripts/pg-build made it, else from its binaries.
pub fn describe(f: &Found) -> Build {
    let dir = &f.bin.dir;
    let manifest = dir
        .parent()
        .map(|p| p.join(MANIFEST))
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| serde_json::from_str::<Manifest>(&t).ok());
    let version = first_line(&dir.join("postgres"), "--version")
        .and_then(|l| l.split_whitespace().nth(2).map(str::to_string));
    let mut b = Build {
        name: f.name.clone(),
        bin_dir: dir.display().to_string(),
        version,
        ..Build::default()
    };
    match manifest {
        Some(m) => {
            b.configure = m.configure;
            b.patches = m.patches;
            b.source = m.source_package.map(|p| {
                let upstream = match m.debian_patches_applied {
                    Some(false) => ", upstream tarball",
                    _ => "",
                };
                format!(
                    "{p} {} (Debian source package{upstream}; scripts/pg-build)",
                    m.debian_version.unwrap_or_default()
                )
            });
        }
        None => b.configure = first_line(&dir.join("pg_config"), "--configure"),
    }
    b
}

fn first_line(exe: &Path, arg: &str) -> Option<String> {
    let out = Command::new(exe).arg(arg).output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
}

/// `SHOW rseq_slice.counters` as the server says it. `None` when the text is neither form.
pub fn parse_counters(text: &str) -> Option<RseqSlice> {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix("enabled=off") {
        let why = rest
            .trim()
            .strip_prefix("why=")
            .map(|w| w.trim_matches('"').to_string());
        return Some(RseqSlice {
            enabled: false,
            why,
            ..RseqSlice::default()
        });
    }
    let rest = text.strip_prefix("enabled=on")?;
    let mut r = RseqSlice {
        enabled: true,
        ..RseqSlice::default()
    };
    for word in rest.split_whitespace() {
        let (k, v) = word.split_once('=')?;
        let v: u64 = v.parse().ok()?;
        match k {
            "processes" => r.processes = v,
            "requests" => r.requests = v,
            "grants" => r.grants = v,
            "yields" => r.yields = v,
            "cleared" => r.cleared = v,
            _ => {}
        }
    }
    Some(r)
}

/// The counts between two readings (`after` minus `before`), with `backends_left` as given.
pub fn counters_since(after: &RseqSlice, before: &RseqSlice, backends_left: u64) -> RseqSlice {
    RseqSlice {
        enabled: after.enabled,
        why: after.why.clone(),
        processes: after.processes.saturating_sub(before.processes),
        requests: after.requests.saturating_sub(before.requests),
        grants: after.grants.saturating_sub(before.grants),
        yields: after.yields.saturating_sub(before.yields),
        cleared: after.cleared.saturating_sub(before.cleared),
        backends_left,
    }
}

/// The builds a spec lists; a spec made before builds were an axis names one bin directory (`pg_bin`).
pub fn builds_of(spec: &Spec) -> Vec<Build> {
    match spec.builds.is_empty() {
        true => vec![Build {
            name: spec.pg_bin.clone(),
            bin_dir: spec.pg_bin.clone(),
            ..Build::default()
        }],
        false => spec.builds.clone(),
    }
}

/// The builds' versions, comma-separated, in order (`spec.pg_version`; `?` for one that did not say).
pub fn versions(builds: &[Build]) -> String {
    builds
        .iter()
        .map(|b| b.version.as_deref().unwrap_or("?"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The rseq-spinlock patch's counters (`rseq_slice.counters`), when the build has them.
pub fn read_counters(cluster: &Cluster) -> Option<RseqSlice> {
    // current_setting(..., true) is NULL, not an error, on a server without the setting.
    let text = cluster
        .psql(
            pgharness::pgdriver::DB,
            "SELECT current_setting('rseq_slice.counters', true)",
        )
        .ok()?;
    crate::pg::builds::parse_counters(&text)
}

/// Waits (up to 5 s) until the run's client backends have exited and added their rseq counts; returns how
/// many are still connected. Through a pooler its server connections stay: no wait, they are counted.
pub fn wait_for_client_backends(cluster: &Cluster, pooled: bool) -> u64 {
    let sql = "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()";
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = cluster
            .psql(pgharness::pgdriver::DB, sql)
            .ok()
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(0);
        if left == 0 || pooled || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_parse_in_both_forms() {
        let on = parse_counters(
            "enabled=on processes=41 requests=1873312 grants=52 yields=50 cleared=310\n",
        )
        .unwrap();
        assert!(on.enabled);
        assert_eq!(
            (on.processes, on.requests, on.grants, on.yields, on.cleared),
            (41, 1_873_312, 52, 50, 310)
        );
        let off = parse_counters(
            r#"enabled=off why="the kernel lacks the rseq time-slice extension (it came in Linux 7.0)""#,
        )
        .unwrap();
        assert!(!off.enabled);
        assert_eq!(
            off.why.as_deref(),
            Some("the kernel lacks the rseq time-slice extension (it came in Linux 7.0)")
        );
        assert_eq!(parse_counters("on"), None);
        assert_eq!(parse_counters("enabled=on requests=many"), None);
        assert_eq!(parse_counters(""), None);
    }

    #[test]
    fn counters_since_subtracts_and_keeps_the_state() {
        let a = parse_counters("enabled=on processes=3 requests=100 grants=1 yields=1 cleared=2")
            .unwrap();
        let b =
            parse_counters("enabled=on processes=40 requests=9100 grants=8 yields=7 cleared=30")
                .unwrap();
        let d = counters_since(&b, &a, 2);
        assert_eq!(
            (
                d.processes,
                d.requests,
                d.grants,
                d.yields,
                d.cleared,
                d.backends_left
            ),
            (37, 9000, 7, 6, 28, 2)
        );
        assert!(d.enabled);
    }

    fn fake_build(root: &Path, name: &str, manifest: Option<&str>) -> PathBuf {
        let bin = root.join(name).join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let postgres = bin.join("postgres");
        std::fs::write(&postgres, "#!/bin/sh\necho 'postgres (PostgreSQL) 18.6'\n").unwrap();
        let pg_config = bin.join("pg_config");
        std::fs::write(
            &pg_config,
            "#!/bin/sh\necho \" '--prefix=/usr' '--with-icu'\"\n",
        )
        .unwrap();
        for f in [&postgres, &pg_config] {
            std::fs::set_permissions(f, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
        }
        if let Some(m) = manifest {
            std::fs::write(root.join(name).join(MANIFEST), m).unwrap();
        }
        bin
    }

    #[test]
    fn names_and_directories_resolve_and_describe_themselves() {
        let cache = tempfile::tempdir().unwrap();
        fake_build(
            cache.path(),
            "18+rseq-spinlock",
            Some(
                r#"{"schema": 1, "configure": "--enable-debug", "source_package": "postgresql-18",
                    "debian_version": "18.6-3", "debian_patches_applied": false,
                    "patches": [{"name": "rseq-spinlock", "file": "patches/rseq-spinlock/18.patch", "sha256": "ab"}]}"#,
            ),
        );
        let other = tempfile::tempdir().unwrap();
        let dir = fake_build(other.path(), "distro", None);
        let given = format!("18+rseq-spinlock,{}", dir.display());
        let found = find(Some(&given), cache.path()).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].name, "18+rseq-spinlock");
        assert_eq!(found[0].bin.dir, cache.path().join("18+rseq-spinlock/bin"));
        let patched = describe(&found[0]);
        assert_eq!(patched.version.as_deref(), Some("18.6"));
        assert_eq!(patched.configure.as_deref(), Some("--enable-debug"));
        assert_eq!(patched.patches.len(), 1);
        assert_eq!(patched.patches[0].name, "rseq-spinlock");
        assert_eq!(
            patched.source.as_deref(),
            Some(
                "postgresql-18 18.6-3 (Debian source package, upstream tarball; scripts/pg-build)"
            )
        );
        let plain = describe(&found[1]);
        assert_eq!(plain.name, dir.display().to_string());
        assert_eq!(
            plain.configure.as_deref(),
            Some("'--prefix=/usr' '--with-icu'")
        );
        assert!(plain.patches.is_empty() && plain.source.is_none());
    }

    #[test]
    fn unknown_names_say_what_the_cache_has_and_how_to_build() {
        let cache = tempfile::tempdir().unwrap();
        fake_build(cache.path(), "18", None);
        let e = find(Some("19+futex-waitlist"), cache.path())
            .unwrap_err()
            .render(|o| format!("--{}", o.replace('_', "-")));
        assert!(
            e.starts_with("--pg-bin 19+futex-waitlist: no such build in"),
            "{e}"
        );
        assert!(e.contains("(it has: 18)"), "{e}");
        assert!(
            e.contains("make it with scripts/pg-build 19 --patch futex-waitlist"),
            "{e}"
        );
        let e = find(Some("18,18"), cache.path()).unwrap_err().to_string();
        assert!(e.contains("named twice"), "{e}");
        let e = find(Some("/nonexistent/bin"), cache.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("no postgres binary there"), "{e}");
        assert!(matches!(
            find(Some(" , "), cache.path()),
            Err(OptionError::Empty { .. })
        ));
    }
}
