//! The throwaway cluster against real PostgreSQL 15: stopped and gone on drop even when its directory was
//! removed from under it (the postmaster.pid that `pg_ctl stop` needs goes with it).

use std::time::{Duration, Instant};

use pgharness::pgcluster::Cluster;

fn alive(pid: u32) -> bool {
    // A zombie is gone for our purposes; the postmaster's parent (pg_ctl's shell) has exited, so it is reaped
    // by init.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

/// Found by the pool-test work: a test that panicked removed its temp dir under a running bench, whose
/// cleanup then failed at `pg_ctl stop` ("No such file or directory") and left the postmaster running.
#[test]
fn a_cluster_whose_directory_vanished_is_still_stopped() {
    let bin = hostfacts::pgbin::find(None, Some(15))
        .expect("PostgreSQL server binaries (scripts/test installs postgresql-15)");
    let parent = tempfile::tempdir().unwrap();
    let mut c = Cluster::create(bin, Some(parent.path())).unwrap();
    c.start(&[("shared_buffers".into(), "16MB".into())])
        .unwrap();
    let pid = c.postmaster_pid().expect("a running postmaster");
    assert!(alive(pid));
    std::fs::remove_dir_all(c.root()).unwrap();
    assert_eq!(
        c.postmaster_pid(),
        None,
        "postmaster.pid went with the directory"
    );
    // PostgreSQL notices a vanished data directory by itself, but only at its next periodic check (18 s
    // after the removal when tried here): the cluster must not leave that to chance. (Dropping it does the
    // same as `remove`.)
    c.remove()
        .expect("stopped and removed, though pg_ctl could not stop it");
    let t = Instant::now();
    while alive(pid) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(pid), "postmaster {pid} outlived its cluster by 5 s");
}
