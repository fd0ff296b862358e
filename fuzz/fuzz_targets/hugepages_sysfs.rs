//! `/sys/kernel/mm/hugepages/hugepages-<size>kB/*`: the pool files, read through a sysroot as the audit
//! and `hugepages` read them. The input is split at newlines: the directory's size, then nr_hugepages,
//! free_hugepages, resv_hugepages, surplus_hugepages and nr_overcommit_hugepages.
#![no_main]
use std::path::PathBuf;
use std::sync::OnceLock;

use hostfacts::{memory, Host};
use libfuzzer_sys::fuzz_target;

static ROOT: OnceLock<tempfile::TempDir> = OnceLock::new();

const FILES: [&str; 5] = [
    "nr_hugepages",
    "free_hugepages",
    "resv_hugepages",
    "surplus_hugepages",
    "nr_overcommit_hugepages",
];

fuzz_target!(|data: &[u8]| {
    let root = ROOT.get_or_init(|| tempfile::tempdir().expect("a temp dir for the sysroot"));
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\n');
    let size = parts.next().unwrap_or("");
    if size.contains('/') || size.contains('\0') || size.len() > 64 {
        return; // not one directory name
    }
    let pools: PathBuf = root.path().join("sys/kernel/mm/hugepages");
    let _ = std::fs::remove_dir_all(&pools);
    let dir = pools.join(format!("hugepages-{size}kB"));
    std::fs::create_dir_all(&dir).expect("creating the pool dir");
    for (f, v) in FILES.iter().zip(parts) {
        std::fs::write(dir.join(f), v).expect("writing a pool file");
    }
    let host = Host::at(root.path());
    if let Some(ps) = memory::read_pools(&host).get() {
        for p in ps {
            let _ = (p.committed(), p.available(), p.pinned_kib());
            assert!(p.available() <= p.free);
        }
    }
});
