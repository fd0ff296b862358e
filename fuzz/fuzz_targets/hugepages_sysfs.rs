//! `/sys/kernel/mm/hugepages/hugepages-<size>kB/*`: the pool files, read through a sysroot as the audit
//! and `hugepages` read them. The input is split at newlines: the directory's size, then nr_hugepages,
//! free_hugepages, resv_hugepages, surplus_hugepages and nr_overcommit_hugepages. The size is also meminfo's
//! `Hugepagesize`, and the host's pool target is computed for a size asked about (`Hugepagesize: 0 kB` and a
//! `hugepages-0kB` pool divided by zero before).
#![no_main]
use std::path::PathBuf;
use std::sync::OnceLock;

use hostfacts::hugepages::{sizing, target};
use hostfacts::{memory, Host};
use results::host::hugepages::{Basis, Need};
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
    std::fs::create_dir_all(root.path().join("proc")).expect("creating proc/");
    std::fs::write(
        root.path().join("proc/meminfo"),
        format!("MemTotal: 4194304 kB\nHugepagesize: {size} kB\n"),
    )
    .expect("writing meminfo");
    let host = Host::at(root.path());
    if let Some(ps) = memory::read_pools(&host).get() {
        for p in ps {
            let _ = (p.committed(), p.available(), p.pinned_kib(), p.persistent());
            assert!(p.available() <= p.free);
        }
    }
    let mem = memory::read(&host);
    let page_kib = size.trim().parse::<u64>().unwrap_or(2048);
    let basis = Basis::Given { size_kib: 1 << 20 };
    let own = sizing::own_sizing(&basis, page_kib);
    let need = Need {
        label: "1GB of shared memory".into(),
        postmaster_pid: None,
        basis: basis.clone(),
        pages_exact: own.pages_exact,
        pages_needed: own.pages_needed,
        own_pages: 0,
    };
    let t = target::for_page_size(&mem, &[], page_kib, &|_| page_kib, vec![need]);
    assert!(t.target >= own.pages_needed);
    let _ = (t.shortfall(), t.describe_for(None));
    let plan = sizing::plan(
        basis,
        page_kib,
        target::default_page_kib(&mem),
        None,
        Some(t),
    );
    let _ = hostfacts::targets::pins_most_ram("fuzz", &plan, &mem);
});
