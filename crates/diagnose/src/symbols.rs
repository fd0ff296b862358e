//! Addresses to function names: the kernel's from `/proc/kallsyms`, user space's from the ELF symbol
//! tables of the files a process maps (`/proc/PID/maps` gives the file and the offset).
//!
//! Debian's `postgres` is stripped of `.symtab` but exports its functions in `.dynsym` (`s_lock`,
//! `perform_spin_delay`, `StrategyGetBuffer`, the LWLock functions), which is enough here; a static
//! function shows as the file's name with `?`. The `object` crate reads the tables (its ELF reader only).

use std::collections::HashMap;
use std::path::Path;

use hostfacts::parse::SmapsMapping;

/// Function symbols sorted by address; a lookup finds the last start at or below the address.
#[derive(Debug, Default, Clone)]
pub struct SymbolTable {
    /// (start, end or 0 when unknown, name index).
    starts: Vec<(u64, u64, u32)>,
    names: Vec<String>,
}

impl SymbolTable {
    fn push(&mut self, start: u64, size: u64, name: &str) {
        self.starts.push((
            start,
            if size > 0 { start + size } else { 0 },
            self.names.len() as u32,
        ));
        self.names.push(name.to_string());
    }

    fn finish(mut self) -> Self {
        self.starts
            .sort_unstable_by_key(|s| (s.0, std::cmp::Reverse(s.1)));
        self.starts.dedup_by_key(|s| s.0);
        self
    }

    /// Symbols held.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// True when it holds none.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// The function containing `addr`: the last symbol starting at or below it, if `addr` is inside its
    /// size (when known) and not past `limit` bytes from its start.
    pub fn lookup(&self, addr: u64, limit: u64) -> Option<&str> {
        let i = self
            .starts
            .partition_point(|s| s.0 <= addr)
            .checked_sub(1)?;
        let (start, end, name) = self.starts[i];
        let inside = if end > 0 {
            addr < end
        } else {
            addr - start < limit
        };
        inside.then(|| self.names[name as usize].as_str())
    }
}

/// Parses `/proc/kallsyms` (`ADDRESS TYPE NAME [MODULE]`) into its text symbols. Returns None when every
/// address is zero: the kernel hides them (`kptr_restrict`, or not root).
pub fn kallsyms(text: &str) -> Option<SymbolTable> {
    let mut t = SymbolTable::default();
    let mut nonzero = false;
    for line in text.lines() {
        let mut w = line.split_whitespace();
        let (Some(a), Some(ty), Some(name)) = (w.next(), w.next(), w.next()) else {
            continue;
        };
        if !matches!(ty, "t" | "T" | "w" | "W") {
            continue;
        }
        let Ok(addr) = u64::from_str_radix(a, 16) else {
            continue;
        };
        nonzero |= addr != 0;
        t.push(addr, 0, name);
    }
    nonzero.then(|| t.finish())
}

/// A loaded ELF file's functions, keyed by file offset through its loadable segments.
#[derive(Debug, Default, Clone)]
pub struct ElfSymbols {
    table: SymbolTable,
    /// (file offset, virtual address, size in the file) of each PT_LOAD segment.
    segments: Vec<(u64, u64, u64)>,
}

impl ElfSymbols {
    /// Reads `.symtab` and `.dynsym` (functions only) and the loadable segments of an ELF image.
    pub fn parse(data: &[u8]) -> Result<Self, object::Error> {
        use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
        let file = object::File::parse(data)?;
        let mut table = SymbolTable::default();
        for sym in file.symbols().chain(file.dynamic_symbols()) {
            if sym.kind() != SymbolKind::Text || sym.address() == 0 {
                continue;
            }
            if let Ok(name) = sym.name() {
                table.push(sym.address(), sym.size(), name);
            }
        }
        let segments = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, s.address(), size)
            })
            .collect();
        Ok(ElfSymbols {
            table: table.finish(),
            segments,
        })
    }

    /// The function at a file offset.
    pub fn at_offset(&self, offset: u64) -> Option<&str> {
        let &(off, vaddr, _) = self
            .segments
            .iter()
            .find(|(off, _, size)| offset >= *off && offset < off + size)?;
        self.table.lookup(offset - off + vaddr, 1 << 16)
    }
}

/// The executable mappings of a process (`/proc/PID/maps` text).
pub fn exec_maps(maps_text: &str) -> Vec<SmapsMapping> {
    hostfacts::parse::smaps(maps_text)
        .into_iter()
        .filter(|m| m.perms.contains('x'))
        .collect()
}

/// Resolves user addresses through a process's executable mappings, loading each mapped file's symbols
/// once for every process that maps it.
#[derive(Debug, Default)]
pub struct UserResolver {
    files: HashMap<String, Option<ElfSymbols>>,
}

impl UserResolver {
    /// The name of the function at `addr` in a process with these mappings: `name`, or `FILE:?` when the
    /// file has no symbol there; None outside every executable mapping.
    pub fn name(&mut self, maps: &[SmapsMapping], addr: u64) -> Option<String> {
        let m = maps.iter().find(|m| addr >= m.start && addr < m.end)?;
        let path = m.path.clone();
        let offset = addr - m.start + m.offset;
        let syms = self
            .files
            .entry(path.clone())
            .or_insert_with(|| {
                std::fs::read(&path)
                    .ok()
                    .and_then(|d| ElfSymbols::parse(&d).ok())
            })
            .as_ref();
        Some(match syms.and_then(|s| s.at_offset(offset)) {
            Some(n) => n.to_string(),
            None => format!(
                "{}:?",
                Path::new(&path)
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or(path)
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kallsyms_lookup_and_hidden() {
        let text = "ffffffff81000000 T _stext\nffffffff81001000 t clear_page_erms\n\
                    ffffffff81001100 T exc_page_fault\nffffffff82000000 D some_data\n\
                    ffffffffc0000000 t mod_fn\t[mod]\n";
        let t = kallsyms(text).unwrap();
        assert_eq!(
            t.lookup(0xffffffff81001010, u64::MAX),
            Some("clear_page_erms")
        );
        assert_eq!(
            t.lookup(0xffffffff81001100, u64::MAX),
            Some("exc_page_fault")
        );
        assert_eq!(t.lookup(0xffffffffc0000004, u64::MAX), Some("mod_fn"));
        assert_eq!(t.lookup(0x1000, u64::MAX), None);
        assert!(kallsyms("0000000000000000 T _stext\n0000000000000000 t x\n").is_none());
    }

    #[test]
    fn table_respects_sizes() {
        let mut t = SymbolTable::default();
        t.push(0x1000, 0x10, "a");
        t.push(0x2000, 0, "b");
        let t = t.finish();
        assert_eq!(t.lookup(0x100f, 1 << 16), Some("a"));
        assert_eq!(t.lookup(0x1010, 1 << 16), None);
        assert_eq!(t.lookup(0x3000, 0x1000), None);
        assert_eq!(t.lookup(0x3000, 0x2000), Some("b"));
    }

    /// This test binary's own symbols resolve through its own maps: a function of it is named.
    #[test]
    fn resolves_own_function() {
        let maps = exec_maps(&std::fs::read_to_string("/proc/self/maps").unwrap());
        let mut r = UserResolver::default();
        let addr = kallsyms as *const () as u64;
        let name = r.name(&maps, addr).unwrap();
        assert!(name.contains("kallsyms"), "{name}");
        assert_eq!(r.name(&maps, 8), None);
    }
}
