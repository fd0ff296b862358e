//! The postmaster's executable as the instance runs it, read through `/proc/PID/map_files` (the mapped file
//! itself, whatever its path holds now or in this mount namespace): its build ID, whether the file at its
//! path is still that file (a package upgrade not yet followed by a restart replaces it), which symbol
//! tables name its functions, and whether its code keeps frame pointers, without which the kernel's walk of
//! a user stack finds no callers.
//!
//! Frame pointers are read off the code: a function that keeps one starts by saving the caller's and
//! setting its own, on x86_64 `push %rbp; mov %rsp,%rbp` (55 48 89 e5, after an `endbr64` where CET is
//! on), on aarch64 `stp x29, x30, [sp, #-N]!; mov x29, sp` (after a `paciasp` or `bti c`). GCC omits them
//! at -O2 unless built with `-fno-omit-frame-pointer` (Fedora 38+, Ubuntu 24.04+ distribution builds, or
//! `scripts/pg-build --frame-pointers`). The functions looked at are the exported ones.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use hostfacts::parse::SmapsMapping;
use object::{Object, ObjectSection, ObjectSymbol};
use results::diagnose::Binary;

/// Functions looked at: the first this many exported ones.
const PROBES: usize = 400;

/// Share of the functions looked at that must set up a frame pointer for the build to count as keeping
/// them. With `-fno-omit-frame-pointer` GCC still leaves it out of small leaf functions and uses %rbp as a
/// general register in some others: Debian's PostgreSQL 15 (built so: `pg_config --cflags`) sets it up
/// in 242 of its first 400 exports; without the flag GCC sets it up only where a frame's size varies.
const KEPT_MIN: f64 = 0.3;

/// What is known of postmaster `pm`'s executable; None when it has no mapping of its own executable
/// (gone, or not readable).
pub fn inspect(pm: u32) -> Option<Binary> {
    let maps = std::fs::read_to_string(format!("/proc/{pm}/maps")).ok()?;
    let mappings = hostfacts::parse::smaps(&maps);
    let exe = std::fs::read_link(format!("/proc/{pm}/exe")).ok()?;
    let exe = exe.to_string_lossy().into_owned();
    let m = mappings.iter().find(|m| m.path == exe && m.inode != 0)?;
    Some(read(pm, m))
}

fn read(pm: u32, m: &SmapsMapping) -> Binary {
    let path = m.path.trim_end_matches(" (deleted)").to_string();
    let through = PathBuf::from(format!("/proc/{pm}/map_files/{:x}-{:x}", m.start, m.end));
    let rooted = PathBuf::from(format!("/proc/{pm}/root{path}"));
    let mut b = Binary {
        path: path.clone(),
        read_through: through.display().to_string(),
        build_id: None,
        replaced_on_disk: None,
        symbols: String::new(),
        frame_pointers: None,
        frame_pointer_evidence: String::new(),
    };
    let (file, via) = match std::fs::File::open(&through) {
        Ok(f) => (f, through),
        Err(e) => match std::fs::File::open(&rooted) {
            // Without map_files (it needs CAP_SYS_ADMIN), the file at the path in the process's own root,
            // but only when it is the mapped inode.
            Ok(f) if f.metadata().is_ok_and(|md| md.ino() == m.inode) => {
                b.read_through = format!("{} ({through:?}: {e})", rooted.display());
                (f, rooted.clone())
            }
            _ => {
                b.read_through = format!("unreadable: {}: {e}", through.display());
                b.symbols = "unknown (the mapped file is unreadable)".into();
                return b;
            }
        },
    };
    // The kernel shows a mapping's path relative to the reader's root when it can (a chroot under this
    // host's tree: this host's path), else as the process's own namespace has it (a container's): the file
    // is still the one running when either names the mapped inode.
    let mapped = file.metadata().ok().map(|md| (md.dev(), md.ino()));
    let same = |p: &Path| std::fs::metadata(p).ok().map(|md| (md.dev(), md.ino())) == mapped;
    b.replaced_on_disk =
        Some(m.path.ends_with(" (deleted)") || !(same(Path::new(&path)) || same(&rooted)));
    // SAFETY: a read-only private mapping of an executable that a running process maps: the kernel
    // refuses writes to a file being executed (ETXTBSY), and a package manager replaces it by renaming a
    // new file over its name, which leaves this inode whole.
    let Ok(data) = (unsafe { memmap2::Mmap::map(&file) }) else {
        b.symbols = format!("unknown ({} could not be mapped)", via.display());
        return b;
    };
    let Ok(elf) = object::File::parse(&*data) else {
        b.symbols = "unknown (not an ELF file)".into();
        return b;
    };
    b.build_id = elf.build_id().ok().flatten().map(hex);
    b.symbols = symbols(&elf, b.build_id.as_deref(), pm);
    let (fp, evidence) = frame_pointers(&elf);
    b.frame_pointers = fp;
    b.frame_pointer_evidence = evidence;
    b
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Which tables name the functions: `.symtab` (static functions too), or only `.dynsym` (the exported
/// ones), and a debug file found by the build ID in the host's or the instance's root.
fn symbols(elf: &object::File, build_id: Option<&str>, pm: u32) -> String {
    let symtab = elf.section_by_name(".symtab").is_some();
    let mut s = if symtab {
        ".symtab (static functions named)".to_string()
    } else {
        ".dynsym only (stripped: static functions unnamed)".to_string()
    };
    if let Some(id) = build_id.filter(|id| id.len() > 2) {
        let rel = format!("usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..]);
        for root in ["/".to_string(), format!("/proc/{pm}/root/")] {
            let p = Path::new(&root).join(&rel);
            if p.exists() {
                s.push_str(&format!("; debug file /{rel}"));
                if root != "/" {
                    s.push_str(" (in the instance's root only: not read)");
                }
                break;
            }
        }
    }
    s
}

/// Whether the exported functions start by setting up a frame pointer: Some(true) when at least
/// [`KEPT_MIN`] of those looked at do, Some(false) when fewer do, None when none is found or the
/// architecture is not known here.
fn frame_pointers(elf: &object::File) -> (Option<bool>, String) {
    let arch = elf.architecture();
    let (mut kept, mut seen) = (0usize, 0usize);
    for sym in elf.dynamic_symbols() {
        if seen == PROBES {
            break;
        }
        if sym.kind() != object::SymbolKind::Text || sym.size() < 16 {
            continue;
        }
        let Some(code) = code_at(elf, sym.address(), 16) else {
            continue;
        };
        match prologue_keeps_fp(arch, code) {
            Some(k) => {
                seen += 1;
                kept += usize::from(k);
            }
            None => return (None, format!("not checked on {arch:?}")),
        }
    }
    if seen == 0 {
        return (None, "no exported function found".into());
    }
    let yes = kept as f64 >= KEPT_MIN * seen as f64;
    let evidence = format!(
        "{kept} of {seen} exported functions set up a frame pointer first{}",
        if yes {
            ""
        } else {
            ": built without -fno-omit-frame-pointer"
        }
    );
    (Some(yes), evidence)
}

/// `len` bytes of code at virtual address `addr`.
fn code_at<'d>(elf: &object::File<'d>, addr: u64, len: u64) -> Option<&'d [u8]> {
    elf.sections()
        .find(|s| addr >= s.address() && addr + len <= s.address() + s.size())
        .and_then(|s| {
            let data = s.data().ok()?;
            let at = (addr - s.address()) as usize;
            data.get(at..at + len as usize)
        })
}

/// Whether a function's first instructions set up a frame pointer; None for an architecture not known.
pub fn prologue_keeps_fp(arch: object::Architecture, code: &[u8]) -> Option<bool> {
    match arch {
        object::Architecture::X86_64 => {
            let code = code.strip_prefix(&[0xf3, 0x0f, 0x1e, 0xfa]).unwrap_or(code); // endbr64
            Some(code.starts_with(&[0x55, 0x48, 0x89, 0xe5]))
        }
        object::Architecture::Aarch64 => {
            let words: Vec<u32> = code
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            // paciasp / bti c / bti jc first, where pointer authentication or BTI is on.
            let skip = words
                .iter()
                .take_while(|&&w| matches!(w, 0xd503_233f | 0xd503_245f | 0xd503_24df))
                .count();
            let w = &words[skip..];
            // stp x29, x30, [sp, #-N]! (64-bit pre-index, Rt x29, Rt2 x30, Rn sp), then mov x29, sp.
            let stp = w.first().is_some_and(|&i| i & 0xffc0_7fff == 0xa980_7bfd);
            let mov = w.get(1) == Some(&0x9100_03fd);
            Some(stp && mov)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prologues() {
        use object::Architecture::{Aarch64, X86_64};
        assert_eq!(
            prologue_keeps_fp(X86_64, &[0x55, 0x48, 0x89, 0xe5, 0x41]),
            Some(true)
        );
        assert_eq!(
            prologue_keeps_fp(X86_64, &[0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5]),
            Some(true)
        );
        // push %r15 first: no frame pointer.
        assert_eq!(
            prologue_keeps_fp(X86_64, &[0x41, 0x57, 0x41, 0x56]),
            Some(false)
        );
        // stp x29, x30, [sp, #-32]!; mov x29, sp
        let fp: Vec<u8> = [0xa9be_7bfdu32, 0x9100_03fd]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        assert_eq!(prologue_keeps_fp(Aarch64, &fp), Some(true));
        let pac: Vec<u8> = [0xd503_233fu32, 0xa9bf_7bfd, 0x9100_03fd]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        assert_eq!(prologue_keeps_fp(Aarch64, &pac), Some(true));
        // sub sp, sp, #32 first.
        assert_eq!(
            prologue_keeps_fp(Aarch64, &0xd100_83ffu32.to_le_bytes()),
            Some(false)
        );
    }

    /// Debian's PostgreSQL 15, as the test command installs it: stripped of `.symtab`, and built with
    /// `-fno-omit-frame-pointer` (Debian's packaging adds it; `pg_config --cflags` shows it).
    #[test]
    fn debian_postgres_keeps_frame_pointers() {
        let path = "/usr/lib/postgresql/15/bin/postgres";
        let Ok(data) = std::fs::read(path) else {
            panic!("{path}: the tests need PostgreSQL 15 (scripts/test installs postgresql-15)");
        };
        let elf = object::File::parse(&*data).unwrap();
        let (fp, why) = frame_pointers(&elf);
        assert_eq!(fp, Some(true), "{why}");
        assert!(symbols(&elf, None, 1).starts_with(".dynsym only"));
    }
}
