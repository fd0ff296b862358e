//! Debug files found by build ID: what names a stripped object's static functions.
//!
//! Debian's `-dbgsym` packages (and `libc6-dbg`) install each object's debug file as
//! `/usr/lib/debug/.build-id/XX/REST.debug`, XX and REST the hex of its GNU build ID; Fedora's and Ubuntu's
//! `-debuginfo`/`-dbgsym` packages do the same. The debug file keeps the `.symtab` that stripping removed
//! (`_int_malloc`, `__memmove_avx512_unaligned_erms`, PostgreSQL's static functions), at the same virtual
//! addresses as the object. Only that table is read (blazesym's ELF reader): the DWARF beside it, which
//! Debian compresses, would cost a diagnosis more to inflate than all the rest of its start (22% of a 2 s
//! diagnosis's own CPU for libc's alone, measured 2026-11-29) for names the table already gives.
//!
//! An object is read through `/proc/PID/map_files/START-END` (the mapped file itself); its debug file is
//! looked for on this host, then in the process's own root (`/proc/PID/root`: a container's debug packages).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use hostfacts::parse::SmapsMapping;
use object::{Object, ObjectSegment};

/// Where an object's debug file is, and how its file offsets map to its virtual addresses.
#[derive(Debug)]
struct Debug {
    path: PathBuf,
    /// (file offset, virtual address, size in the file) of each loadable segment.
    segments: Vec<(u64, u64, u64)>,
}

/// The debug files of the objects processes map, looked up once per mapped object.
#[derive(Debug, Default)]
pub struct DebugFiles {
    /// (process, mapping start) -> its object's debug file, None when it has none.
    by_mapping: HashMap<(u32, u64), Option<Debug>>,
}

impl DebugFiles {
    /// The debug file of the object process `pid` maps at `m`, and the virtual address in it of `addr`
    /// (an address inside `m`); None when the object has no build ID or no debug file is installed.
    pub fn locate(&mut self, pid: u32, m: &SmapsMapping, addr: u64) -> Option<(PathBuf, u64)> {
        let d = self
            .by_mapping
            .entry((pid, m.start))
            .or_insert_with(|| find(pid, m))
            .as_ref()?;
        let off = addr.checked_sub(m.start)? + m.offset;
        let &(seg_off, vaddr, _) = d
            .segments
            .iter()
            .find(|(o, _, size)| off >= *o && off < o + size)?;
        Some((d.path.clone(), off - seg_off + vaddr))
    }
}

fn find(pid: u32, m: &SmapsMapping) -> Option<Debug> {
    let through = format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end);
    let file = std::fs::File::open(&through).ok()?;
    // SAFETY: a read-only private mapping of an object a running process maps, only parsed here: the kernel
    // refuses writes to a mapped executable (ETXTBSY) and package managers replace files by renaming a new
    // one over the name, which leaves this inode whole.
    let data = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let elf = object::File::parse(&*data).ok()?;
    let id = elf.build_id().ok().flatten()?;
    let path = debug_path(id, pid)?;
    let segments = elf
        .segments()
        .map(|s| {
            let (off, size) = s.file_range();
            (off, s.address(), size)
        })
        .collect();
    Some(Debug { path, segments })
}

/// The debug file of build ID `id`: this host's, else the one in process `pid`'s root.
fn debug_path(id: &[u8], pid: u32) -> Option<PathBuf> {
    let (first, rest) = id.split_first()?;
    if rest.len() < 4 {
        return None;
    }
    let rest: String = rest.iter().map(|b| format!("{b:02x}")).collect();
    let rel = format!("usr/lib/debug/.build-id/{first:02x}/{rest}.debug");
    [
        PathBuf::from("/"),
        PathBuf::from(format!("/proc/{pid}/root")),
    ]
    .into_iter()
    .map(|root| root.join(&rel))
    .find(|p| is_file(p))
}

fn is_file(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// libc's debug file (Debian's libc6-dbg, when installed) names an address of libc this process maps:
    /// the object's segments take the address to the debug file's.
    #[test]
    fn libc_is_found_by_build_id_when_its_debug_file_is_installed() {
        let me = std::process::id();
        let maps =
            crate::symbolize::exec_maps(&std::fs::read_to_string("/proc/self/maps").unwrap());
        let libc = maps
            .iter()
            .find(|m| m.path.contains("/libc.so.6"))
            .expect("this test maps libc");
        let mut d = DebugFiles::default();
        let got = d.locate(me, libc, libc.start + 16);
        // Present exactly when the host has the file for libc's build ID.
        let data = std::fs::read(libc.path.trim_end_matches(" (deleted)")).unwrap();
        let elf = object::File::parse(&*data).unwrap();
        let id = elf.build_id().unwrap().unwrap();
        let want = debug_path(id, me);
        assert_eq!(got.as_ref().map(|(p, _)| p.clone()), want);
        if let Some((_, vaddr)) = got {
            let seg = elf
                .segments()
                .find(|s| s.file_range().0 <= libc.offset + 16)
                .unwrap();
            assert!(vaddr >= seg.address());
        }
    }
}
