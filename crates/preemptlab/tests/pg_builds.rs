//! PostgreSQL builds from `scripts/pg-build` (docs/pg-builds.md): the test command builds PostgreSQL 18 and
//! 18 with the `rseq-spinlock` patch into the cache once (scripts/test); these tests check that the script
//! answers from the cache without building, that what it installed runs from where it was moved, that its
//! manifest says what was built, and that bad input is one line and exit 2.
//!
//! They need the two cached builds: without them they fail and say which command makes them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The builds scripts/test makes.
const BUILDS: [(&str, &[&str]); 2] = [("18", &[]), ("18+rseq-spinlock", &["rseq-spinlock"])];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cache() -> PathBuf {
    std::env::var_os("PREEMPTLAB_PG_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/preemptlab/pg"))
}

fn pg_build(args: &[&str]) -> Output {
    Command::new(repo().join("scripts/pg-build"))
        .args(args)
        .output()
        .unwrap()
}

/// The cached build NAME's manifest; fails naming the command that makes it.
fn manifest(name: &str) -> Value {
    let path = cache().join(name).join("preemptlab-build.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        let (version, patch) = name.split_once('+').unwrap_or((name, ""));
        let patch = if patch.is_empty() {
            String::new()
        } else {
            format!(" --patch {patch}")
        };
        panic!(
            "{}: {e}: this test needs the cached build; make it with scripts/pg-build {version}{patch} (scripts/test does)",
            path.display()
        )
    });
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn stdout_line(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn cached_builds_are_printed_without_building() {
    for (name, patches) in BUILDS {
        let _ = manifest(name);
        let mut args = vec!["18"];
        for p in patches {
            args.extend(["--patch", p]);
        }
        let o = pg_build(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{args:?}: {err}");
        assert_eq!(
            stdout_line(&o),
            cache().join(name).join("bin").display().to_string(),
            "{args:?}"
        );
        assert!(err.contains(&format!("{name}: cached")), "{args:?}: {err}");
        assert!(!err.contains("make"), "{args:?} built something: {err}");
    }
    let list = pg_build(&["--list"]);
    let list = String::from_utf8_lossy(&list.stdout);
    for (name, _) in BUILDS {
        assert!(
            list.lines().any(|l| l.split(' ').next() == Some(name)),
            "{name} not in --list: {list}"
        );
    }
}

#[test]
fn manifests_say_what_was_built() {
    for (name, patches) in BUILDS {
        let m = manifest(name);
        assert_eq!(m["name"], name);
        assert_eq!(m["major"], 18);
        assert_eq!(m["source_package"], "postgresql-18");
        assert!(
            m["debian_version"].as_str().unwrap().starts_with("18."),
            "{m}"
        );
        assert_eq!(m["debian_patches_applied"], false);
        assert_eq!(
            m["configure"],
            "--enable-debug --enable-depend --with-icu --without-llvm"
        );
        let listed: Vec<&str> = m["patches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(listed, patches.to_vec(), "{m}");
        for p in m["patches"].as_array().unwrap() {
            let file = repo().join(p["file"].as_str().unwrap());
            let text = std::fs::read(&file).unwrap();
            let sha = Command::new("sha256sum").arg(&file).output().unwrap();
            let sha = String::from_utf8_lossy(&sha.stdout);
            assert_eq!(
                sha.split_whitespace().next(),
                p["sha256"].as_str(),
                "{} changed since the build ({} bytes now); rebuild with scripts/pg-build",
                file.display(),
                text.len()
            );
        }
        assert!(m["build_seconds"].as_u64().unwrap() > 0, "{m}");
    }
}

#[test]
fn installed_builds_run_where_they_were_moved() {
    for (name, _) in BUILDS {
        let m = manifest(name);
        let bin = cache().join(name).join("bin");
        let version = Command::new(bin.join("postgres"))
            .arg("--version")
            .output()
            .unwrap();
        assert_eq!(stdout_line(&version), m["postgres_version"], "{name}");
        assert!(stdout_line(&version).starts_with("postgres (PostgreSQL) 18."));
        // Relocated: pg_config answers the cache, and the share directory initdb needs is there.
        let share = Command::new(bin.join("pg_config"))
            .arg("--sharedir")
            .output()
            .unwrap();
        let share = PathBuf::from(stdout_line(&share));
        assert!(share.starts_with(cache().join(name)), "{}", share.display());
        assert!(share.join("postgres.bki").is_file(), "{}", share.display());
        // psql and pgbench load the build's own libpq.
        let ldd = Command::new("ldd")
            .arg(bin.join("pgbench"))
            .output()
            .unwrap();
        let ldd = String::from_utf8_lossy(&ldd.stdout);
        let libpq = ldd.lines().find(|l| l.contains("libpq.so")).unwrap();
        let path = libpq
            .split("=>")
            .nth(1)
            .unwrap()
            .split(" (")
            .next()
            .unwrap();
        let path = std::fs::canonicalize(path.trim()).unwrap();
        assert_eq!(
            path.parent().unwrap(),
            std::fs::canonicalize(cache().join(name).join("lib")).unwrap(),
            "{name}: {libpq}"
        );
    }
}

#[test]
fn the_rseq_build_has_the_patch_and_no_other_does() {
    let strings = |name: &str| {
        let o = Command::new("grep")
            .args(["-c", "rseq slice extension"])
            .arg(cache().join(name).join("bin/postgres"))
            .output()
            .unwrap();
        stdout_line(&o).parse::<u32>().unwrap_or(0)
    };
    assert!(strings("18+rseq-spinlock") > 0);
    assert_eq!(strings("18"), 0);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (args, want) in [
        (&["17"][..], "unknown VERSION '17'"),
        (&[][..], "missing VERSION"),
        (
            &["18", "--patch", "no-such-patch"][..],
            "no patch 'no-such-patch'",
        ),
        (
            &["18", "--patch", "Bad/Name"][..],
            "--patch needs a patch name",
        ),
        (
            &["18", "--jobs", "0"][..],
            "--jobs needs a positive integer",
        ),
        (&["18", "--frobnicate"][..], "unknown option '--frobnicate'"),
        (&["18", "19"][..], "one VERSION only"),
    ] {
        let o = pg_build(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

/// Debian 12's own PostgreSQL, the third build of the axis test.
const DISTRO_BIN: &str = "/usr/lib/postgresql/15/bin";

/// The builds `bench pg --pg-bin` is given below that this machine lacks, each with the command that makes
/// it (empty: all there).
fn missing_for_the_axis() -> Vec<String> {
    let mut missing = Vec::new();
    if !Path::new(DISTRO_BIN).join("postgres").is_file() {
        missing.push(format!("{DISTRO_BIN} (apt-get install postgresql-15)"));
    }
    for (name, patches) in BUILDS {
        if !cache().join(name).join("bin/postgres").is_file() {
            let p: String = patches.iter().map(|p| format!(" --patch {p}")).collect();
            missing.push(format!("{name} (scripts/pg-build 18{p})"));
        }
    }
    missing
}

#[test]
fn bench_pg_runs_builds_as_an_axis_and_compare_splits_by_build() {
    let missing = missing_for_the_axis();
    // scripts/test builds them first and says so: there, a missing build is a failure, not a skip.
    assert!(
        missing.is_empty() || std::env::var_os("PREEMPTLAB_PG_BUILDS_MADE").is_none(),
        "scripts/test built the PostgreSQL builds, yet {} are missing",
        missing.join(", ")
    );
    if !missing.is_empty() {
        eprintln!(
            "SKIPPED bench_pg_runs_builds_as_an_axis: this machine lacks {}; scripts/test makes them",
            missing.join(", ")
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // The clusters' parent (TMPDIR) must be traversable by the postgres user.
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out = tmp.path().join("result.json");
    let d = run_three_builds(tmp.path(), &out);

    let names = builds_described(&d);
    cells_per_build(&d, &names);
    // Both clusters gone: only the result file is left.
    let left: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n != "result.json")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");

    compare_by_build(&out);
}

/// bench pg over the distribution's build, 18 and 18+rseq-spinlock, with its clusters under `tmp`.
fn run_three_builds(tmp: &std::path::Path, out: &std::path::Path) -> Value {
    let given = format!("{DISTRO_BIN},18,18+rseq-spinlock");
    let o = Command::new(assert_cmd::cargo::cargo_bin("preemptlab"))
        .args(["bench", "pg", "--quiet", "--format", "json", "--out"])
        .arg(out)
        .args([
            "--pg-bin",
            &given,
            "--shared-buffers",
            "64MB",
            "--scale",
            "1",
            "--duration",
            "2s",
            "--warmup",
            "1s",
            "--sample-interval",
            "500ms",
            "--huge-pages",
            "off",
            "--clients",
            "2",
            "--repeat",
            "2",
        ])
        .env("TMPDIR", tmp)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "bench pg failed: {err}");
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The axis, in the order given, each build described by its binaries and its manifest; its names.
fn builds_described(d: &Value) -> Vec<&str> {
    let builds = d["spec"]["builds"].as_array().unwrap();
    let names: Vec<&str> = builds.iter().map(|b| b["name"].as_str().unwrap()).collect();
    assert_eq!(names, [DISTRO_BIN, "18", "18+rseq-spinlock"]);
    let version = |name: &str| {
        let bin = match name {
            DISTRO_BIN => PathBuf::from(DISTRO_BIN),
            n => cache().join(n).join("bin"),
        };
        let o = Command::new(bin.join("postgres"))
            .arg("--version")
            .output()
            .unwrap();
        stdout_line(&o)
            .split_whitespace()
            .nth(2)
            .unwrap()
            .to_string()
    };
    for b in builds {
        let name = b["name"].as_str().unwrap();
        assert_eq!(b["version"].as_str().unwrap(), version(name), "{b}");
        let patches: Vec<&str> = b["patches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        let want: &[&str] = match name {
            "18+rseq-spinlock" => &["rseq-spinlock"],
            _ => &[],
        };
        assert_eq!(patches, want, "{b}");
        if name != DISTRO_BIN {
            assert_eq!(
                b["configure"],
                manifest(name)["configure"],
                "{name}: the manifest's flags"
            );
            assert!(b["source"]
                .as_str()
                .unwrap()
                .starts_with("postgresql-18 18."));
        }
    }
    assert_eq!(d["setups"].as_array().unwrap().len(), 3, "a load per build");

    names
}

/// One cell per build, each run in both rounds; only the rseq build has the patch's counters.
fn cells_per_build(d: &Value, names: &[&str]) {
    let cells = d["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3);
    for (c, &name) in cells.iter().zip(names) {
        assert_eq!(c["build"]["name"], name);
        assert_eq!(c["status"], "ok", "{c}");
        let reps = c["reps"].as_array().unwrap();
        let rounds: Vec<u64> = reps.iter().map(|r| r["round"].as_u64().unwrap()).collect();
        assert_eq!(rounds, [0, 1], "{name}");
        for r in reps {
            assert!(r["tps"].as_f64().unwrap() > 0.0, "{name}: {r}");
            let rseq = &r["rseq_slice"];
            if name != "18+rseq-spinlock" {
                assert!(rseq.is_null(), "{name} has no rseq counters: {r}");
                continue;
            }
            // Enabled where the kernel grants slice extensions (and then the run's critical sections
            // requested them), else off with the server's reason.
            if rseq["enabled"] == true {
                assert!(rseq["requests"].as_u64().unwrap() > 0, "{rseq}");
                assert!(rseq["processes"].as_u64().unwrap() > 0, "{rseq}");
            } else {
                assert!(
                    rseq["why"].as_str().unwrap().contains("rseq"),
                    "the server says why: {rseq}"
                );
            }
        }
    }
}

/// compare --by build sets the builds against each other, the first as the base.
fn compare_by_build(out: &std::path::Path) {
    let c = Command::new(assert_cmd::cargo::cargo_bin("preemptlab"))
        .args(["compare", "--by", "build", "--format", "json"])
        .arg(out)
        .output()
        .unwrap();
    assert!(
        c.status.success(),
        "compare --by build: {}",
        String::from_utf8_lossy(&c.stderr)
    );
    let cmp: Value = serde_json::from_slice(&c.stdout).unwrap();
    let inputs: Vec<&str> = cmp["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap())
        .collect();
    assert_eq!(
        inputs,
        [
            format!("build={DISTRO_BIN}").as_str(),
            "build=18",
            "build=18+rseq-spinlock"
        ]
    );
    let tps_rows = cmp["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["metric"] == "tps")
        .count();
    assert_eq!(tps_rows, 2, "18 and 18+rseq-spinlock against 15: {cmp}");
}
