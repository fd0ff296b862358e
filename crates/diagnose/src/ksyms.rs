//! The kernel's function names: the text symbols of `/proc/kallsyms` as a table sorted by address, made once
//! per boot and kept, then read as stored (one read, no parsing) and searched by address.
//!
//! Why not blazesym's kallsyms source: it parses the text on every run, and that was the largest part of a
//! short diagnosis's own CPU. Measured on this project's 2-vCPU host (a 2 s diagnosis beside pgbench, 20
//! interleaved rounds, docs/results/diagnose-start-cpu-2026-11-29.txt): 37.0 ms with blazesym reading the
//! per-boot text copy against 29.5 ms for the bar, of which halving the copy's lines saved 7.5 ms.
//!
//! The kernel formats every line of /proc/kallsyms afresh on each read (`s_show`, `vsnprintf`): tens of
//! milliseconds of CPU. So the first diagnosis of a boot keeps the table in [`osutil::run_dir`]
//! (`/run/preemptlab`, a tmpfs emptied at boot; the file 0600: the addresses are the boot's KASLR secret),
//! keyed by the boot's ID and `/proc/modules` (a module loaded or removed moves symbols), and later ones read
//! that. Where nothing can be kept (not root, the directory not writable), the table is made in memory for
//! the run.
//!
//! The format (little-endian): the 8-byte magic, the count N (u64), N entries of (address u64, name offset
//! u32, name length u32) sorted by address with one name per address (the first kallsyms lists there: an
//! alias is as right as another), then the names. Every entry is checked when the table is read; a file
//! that fails is made again.

use std::io::{self, BufRead};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"PLKSYM01";
const HEAD: usize = 16;
const ENTRY: usize = 16;

/// A table of kernel text symbols.
#[derive(Debug, Clone)]
pub struct Table {
    bytes: Vec<u8>,
    n: usize,
}

/// Why a stored table was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Bad {
    #[error("not a kernel symbol table (magic or size)")]
    Header,
    #[error("entry {0}: address out of order or name out of bounds")]
    Entry(usize),
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn u32_at(b: &[u8], at: usize) -> usize {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w) as usize
}

impl Table {
    /// The text symbols (types t, T, w, W) of a /proc/kallsyms reading, but the padding's `__pfx_NAME`
    /// (since 6.2, CONFIG_FUNCTION_PADDING: half of the lines, and never the function a sampled instruction
    /// is in); a module's symbols without their `[module]` tag.
    pub fn from_kallsyms(r: impl BufRead) -> io::Result<Table> {
        let mut syms: Vec<(u64, Vec<u8>)> = Vec::new();
        for line in r.split(b'\n') {
            let line = line?;
            let mut f = line.splitn(3, |&b| b == b' ');
            let (Some(addr), Some(ty), Some(rest)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            if !matches!(ty, b"t" | b"T" | b"w" | b"W") || rest.starts_with(b"__pfx_") {
                continue;
            }
            let name = rest.split(|&b| b == b'\t').next().unwrap_or(rest);
            let addr = std::str::from_utf8(addr)
                .ok()
                .and_then(|a| u64::from_str_radix(a, 16).ok());
            if let Some(a) = addr.filter(|_| !name.is_empty()) {
                syms.push((a, name.to_vec()));
            }
        }
        // Stable: among aliases the first listed stays first and is the one kept.
        syms.sort_by_key(|s| s.0);
        syms.dedup_by_key(|s| s.0);
        let names_len: usize = syms.iter().map(|s| s.1.len()).sum();
        let mut bytes = Vec::with_capacity(HEAD + ENTRY * syms.len() + names_len);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(syms.len() as u64).to_le_bytes());
        let mut off = 0usize;
        for (a, name) in &syms {
            let (o, l) = (u32::try_from(off), u32::try_from(name.len()));
            let (Ok(o), Ok(l)) = (o, l) else {
                return Err(io::Error::other("kallsyms: names over 4 GiB"));
            };
            bytes.extend_from_slice(&a.to_le_bytes());
            bytes.extend_from_slice(&o.to_le_bytes());
            bytes.extend_from_slice(&l.to_le_bytes());
            off += name.len();
        }
        for (_, name) in &syms {
            bytes.extend_from_slice(name);
        }
        Ok(Table {
            bytes,
            n: syms.len(),
        })
    }

    /// A stored table, checked entry by entry.
    pub fn parse(bytes: Vec<u8>) -> Result<Table, Bad> {
        if bytes.len() < HEAD || &bytes[..8] != MAGIC {
            return Err(Bad::Header);
        }
        let n = usize::try_from(u64_at(&bytes, 8)).map_err(|_| Bad::Header)?;
        let names_at = n
            .checked_mul(ENTRY)
            .and_then(|e| e.checked_add(HEAD))
            .filter(|&end| end <= bytes.len())
            .ok_or(Bad::Header)?;
        let names = bytes.len() - names_at;
        let mut last = 0u64;
        for i in 0..n {
            let at = HEAD + i * ENTRY;
            let (a, off, len) = (
                u64_at(&bytes, at),
                u32_at(&bytes, at + 8),
                u32_at(&bytes, at + 12),
            );
            if (i > 0 && a <= last) || off.checked_add(len).is_none_or(|end| end > names) {
                return Err(Bad::Entry(i));
            }
            last = a;
        }
        Ok(Table { bytes, n })
    }

    /// The stored form.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// How many symbols.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn addr(&self, i: usize) -> u64 {
        u64_at(&self.bytes, HEAD + i * ENTRY)
    }

    /// The function `addr` is in: the symbol at or before it. None below the first symbol.
    pub fn name(&self, addr: u64) -> Option<&str> {
        let (mut lo, mut hi) = (0usize, self.n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.addr(mid) <= addr {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let at = HEAD + lo.checked_sub(1)? * ENTRY;
        let names_at = HEAD + self.n * ENTRY;
        let (off, len) = (u32_at(&self.bytes, at + 8), u32_at(&self.bytes, at + 12));
        std::str::from_utf8(&self.bytes[names_at + off..names_at + off + len]).ok()
    }
}

/// This boot's table and where it came from.
#[derive(Debug, Clone)]
pub struct Kept {
    pub table: Table,
    /// `PATH (this boot's table of /proc/kallsyms)`, `... (made from /proc/kallsyms now)`, or
    /// `/proc/kallsyms (made in memory: WHY)`.
    pub how: String,
}

/// This boot's table under `dir`, made from `kallsyms` when missing or unreadable; made in memory when none
/// can be kept there. Errs only when `kallsyms` itself cannot be read.
pub fn this_boots(kallsyms: &Path, dir: &Path) -> io::Result<Kept> {
    let read = || {
        let f = std::fs::File::open(kallsyms)?;
        Table::from_kallsyms(io::BufReader::with_capacity(1 << 18, f))
    };
    let in_memory = |why: String| -> io::Result<Kept> {
        Ok(Kept {
            table: read()?,
            how: format!("{} (made in memory: {why})", kallsyms.display()),
        })
    };
    let Ok(boot) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") else {
        return in_memory("no boot ID to key a kept table by".into());
    };
    // A kernel built without modules has no /proc/modules, and its symbols never move.
    let modules = match std::fs::read("/proc/modules") {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return in_memory(format!("/proc/modules: {e}")),
    };
    let key = format!("ksyms-{}-{:016x}", boot.trim(), fnv1a(&modules));
    let path = dir.join(&key);
    if is_ours(&path) {
        if let Some(table) = std::fs::read(&path).ok().and_then(|b| Table::parse(b).ok()) {
            return Ok(Kept {
                table,
                how: format!("{} (this boot's table of /proc/kallsyms)", path.display()),
            });
        }
    }
    let table = read()?;
    Ok(match keep(&table, dir, &key) {
        Ok(()) => Kept {
            table,
            how: format!("{} (made from {} now)", path.display(), kallsyms.display()),
        },
        Err(e) => Kept {
            table,
            how: format!(
                "{} (made in memory: none kept in {}: {e})",
                kallsyms.display(),
                dir.display()
            ),
        },
    })
}

/// A regular file owned by this process's user and readable by it alone.
fn is_ours(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| {
        m.file_type().is_file()
            && m.uid() == osutil::account::effective_uid()
            && m.mode() & 0o077 == 0
    })
}

/// The 64-bit FNV-1a hash (a key, not a defence: the directory is root's).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Writes `table` to `dir/key`, 0600, through a temporary file renamed into place; removes the tables of
/// other boots and module lists (and the text copies earlier versions kept, `kallsyms-*`).
fn keep(table: &Table, dir: &Path, key: &str) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(dir)?;
    let tmp: PathBuf = dir.join(format!(".{key}.{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(table.bytes())?;
            f.sync_all()
        });
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, dir.join(key))) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if (name.starts_with("ksyms-") || name.starts_with("kallsyms-")) && name != key {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "ffffffff81000000 T _stext\n\
                        ffffffff81000010 t __pfx_f\n\
                        ffffffff81000020 t f\n\
                        ffffffff81000020 T f_alias\n\
                        ffffffff82000000 D some_data\n\
                        ffffffffc0000000 t mod_fn\t[mod]\n";

    #[test]
    fn names_by_the_symbol_at_or_before() {
        let t = Table::from_kallsyms(TEXT.as_bytes()).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.name(0xffffffff80ffffff), None);
        assert_eq!(t.name(0xffffffff81000000), Some("_stext"));
        // The padding is left out: an address there is the function before it's.
        assert_eq!(t.name(0xffffffff81000015), Some("_stext"));
        assert_eq!(t.name(0xffffffff81000020), Some("f"));
        assert_eq!(t.name(0xffffffff81000fff), Some("f"));
        assert_eq!(t.name(0xffffffffc0000004), Some("mod_fn"));
        assert_eq!(t.name(u64::MAX), Some("mod_fn"));
        let again = Table::parse(t.bytes().to_vec()).unwrap();
        assert_eq!(again.name(0xffffffff81000021), Some("f"));
    }

    /// A stored table that is cut short, out of order or points out of its names is refused.
    #[test]
    fn a_damaged_table_is_refused() {
        let t = Table::from_kallsyms(TEXT.as_bytes()).unwrap();
        let b = t.bytes().to_vec();
        assert_eq!(Table::parse(b[..20].to_vec()).unwrap_err(), Bad::Header);
        assert_eq!(Table::parse(b"PLKSYM00".to_vec()).unwrap_err(), Bad::Header);
        let mut swapped = b.clone();
        swapped[HEAD..HEAD + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(Table::parse(swapped).unwrap_err(), Bad::Entry(1));
        let mut long = b.clone();
        long[HEAD + 12..HEAD + 16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Table::parse(long).unwrap_err(), Bad::Entry(0));
        let mut huge = b;
        huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(Table::parse(huge).unwrap_err(), Bad::Header);
    }

    /// Every one-byte change of a stored table (each position, several values) is refused or read without
    /// a panic, and every address then gets a name from the table's own bounds or none.
    #[test]
    fn any_one_byte_damage_is_refused_or_read_safely() {
        let good = Table::from_kallsyms(TEXT.as_bytes())
            .unwrap()
            .bytes()
            .to_vec();
        let probes = [
            0,
            0xffffffff81000000,
            0xffffffff81000020,
            0xffffffffc0000004,
            u64::MAX,
        ];
        let mut read = 0;
        for at in 0..good.len() {
            for v in [0x00, 0x01, 0x7f, 0x80, 0xff, good[at] ^ 0x20] {
                let mut b = good.clone();
                b[at] = v;
                if let Ok(t) = Table::parse(b) {
                    read += 1;
                    for p in probes {
                        let _ = t.name(p);
                    }
                }
            }
        }
        // Changes inside the names (and equal rewrites) leave a readable table: the loop did read some.
        assert!(read > 0);
        for cut in 0..good.len() {
            if let Ok(t) = Table::parse(good[..cut].to_vec()) {
                assert!(t.len() < 3, "a cut table kept every entry");
            }
        }
    }

    /// The table is kept 0600; the next diagnosis of the boot reads it; a damaged one is made again; the
    /// tables and text copies of other boots are removed when a new one is kept.
    #[test]
    fn this_boots_table() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("kallsyms");
        std::fs::write(&src, TEXT).unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::fs::write(run.join("kallsyms-old-boot"), "x").unwrap();
        std::fs::write(run.join("ksyms-old-boot"), "x").unwrap();
        let first = this_boots(&src, &run).unwrap();
        assert!(first.how.contains(" now)"), "{}", first.how);
        let path = PathBuf::from(first.how.split(' ').next().unwrap());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!run.join("kallsyms-old-boot").exists());
        assert!(!run.join("ksyms-old-boot").exists());
        let again = this_boots(&src, &run).unwrap();
        assert!(again.how.contains("this boot's table"), "{}", again.how);
        assert_eq!(again.table.name(0xffffffffc0000001), Some("mod_fn"));
        std::fs::write(&path, b"PLKSYM01 cut").unwrap();
        let remade = this_boots(&src, &run).unwrap();
        assert!(remade.how.contains(" now)"), "{}", remade.how);
        assert_eq!(remade.table.len(), 3);
        // Where nothing can be kept, in memory.
        let none = this_boots(&src, Path::new("/proc/no/such/dir")).unwrap();
        assert!(none.how.contains("made in memory"), "{}", none.how);
        assert_eq!(none.table.len(), 3);
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert!(this_boots(&dir.path().join("missing"), &empty).is_err());
    }
}
