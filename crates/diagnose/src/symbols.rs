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
///
/// The names live in one string (a kernel has over 100,000 text symbols: one allocation each was a
/// measurable part of a short diagnosis's start).
#[derive(Debug, Default, Clone)]
pub struct SymbolTable {
    /// (start, end or 0 when unknown, the name's offset in `names`, its length).
    starts: Vec<(u64, u64, u32, u32)>,
    names: String,
}

impl SymbolTable {
    pub(crate) fn push(&mut self, start: u64, size: u64, name: &str) {
        self.starts.push((
            start,
            if size > 0 { start + size } else { 0 },
            self.names.len() as u32,
            name.len() as u32,
        ));
        self.names.push_str(name);
    }

    pub(crate) fn finish(mut self) -> Self {
        self.starts
            .sort_unstable_by_key(|s| (s.0, std::cmp::Reverse(s.1)));
        self.starts.dedup_by_key(|s| s.0);
        self
    }

    /// Moves every symbol by `by` (wrapping): a System.map's link-time addresses to where this boot's
    /// KASLR put the kernel. The order is unchanged.
    pub(crate) fn shift(&mut self, by: u64) {
        for s in self.starts.iter_mut() {
            s.0 = s.0.wrapping_add(by);
            if s.1 > 0 {
                s.1 = s.1.wrapping_add(by);
            }
        }
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
        let (start, end, at, len) = self.starts[i];
        let inside = if end > 0 {
            addr < end
        } else {
            addr - start < limit
        };
        inside.then(|| &self.names[at as usize..(at + len) as usize])
    }
}

/// One line of `nm -n` output as `/proc/kallsyms` and System.map hold it (`ADDRESS TYPE NAME`, then a tab
/// and `[MODULE]` in kallsyms): the address, the type letter and the name; None for a line of another shape.
pub(crate) fn nm_line(line: &[u8]) -> Option<(u64, u8, &[u8])> {
    let sp = line.iter().position(|&b| b == b' ')?;
    let (&ty, b' ') = (line.get(sp + 1)?, line.get(sp + 2)?) else {
        return None;
    };
    if sp == 0 || sp > 16 {
        return None;
    }
    let mut addr = 0u64;
    for &b in &line[..sp] {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return None,
        };
        addr = addr << 4 | d as u64;
    }
    let rest = &line[sp + 3..];
    let end = rest
        .iter()
        .position(|&b| b == b'\t' || b == b' ')
        .unwrap_or(rest.len());
    (end > 0).then(|| (addr, ty, &rest[..end]))
}

/// A function's type letter in `nm` output: text, local or global, weak included.
pub(crate) fn is_text(ty: u8) -> bool {
    matches!(ty, b't' | b'T' | b'w' | b'W')
}

/// Collects the text symbols of `nm`-style lines into a table, noting whether any address was not zero
/// (the kernel shows zeros to whoever may not see them).
#[derive(Default)]
pub(crate) struct NmTable {
    pub(crate) table: SymbolTable,
    pub(crate) nonzero: bool,
}

impl NmTable {
    /// Room for a kernel's worth of symbols up front: growing by doubling copied megabytes at the start of
    /// every diagnosis, and capacity never touched costs no memory.
    pub(crate) fn for_kernel() -> Self {
        NmTable {
            table: SymbolTable {
                starts: Vec::with_capacity(1 << 18),
                names: String::with_capacity(8 << 20),
            },
            nonzero: false,
        }
    }

    pub(crate) fn line(&mut self, line: &[u8]) {
        if let Some((addr, ty, name)) = nm_line(line) {
            self.symbol(addr, ty, name);
        }
    }

    /// One symbol of a parsed line: kept when it is a function.
    pub(crate) fn symbol(&mut self, addr: u64, ty: u8, name: &[u8]) {
        if !is_text(ty) {
            return;
        }
        let Ok(name) = std::str::from_utf8(name) else {
            return;
        };
        self.nonzero |= addr != 0;
        self.table.push(addr, 0, name);
    }

    /// The table, or None when every address was zero.
    pub(crate) fn finish(self) -> Option<SymbolTable> {
        self.nonzero.then(|| self.table.finish())
    }
}

/// Parses `/proc/kallsyms` (`ADDRESS TYPE NAME [MODULE]`) into its text symbols. Returns None when every
/// address is zero: the kernel hides them (`kptr_restrict`, or not root).
pub fn kallsyms(text: &[u8]) -> Option<SymbolTable> {
    let mut t = NmTable::default();
    for line in text.split(|&b| b == b'\n') {
        t.line(line);
    }
    t.finish()
}

/// Calls `f` on each line of `r` (without its newline), reading in chunks of a quarter of a megabyte: a
/// file of megabytes is never held whole, and /proc/kallsyms is formatted a chunk at a time.
pub(crate) fn each_line(
    mut r: impl std::io::Read,
    mut f: impl FnMut(&[u8]),
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 1 << 18];
    let mut len = 0;
    loop {
        if len == buf.len() {
            // One line longer than the buffer.
            buf.resize(buf.len() * 2, 0);
        }
        let n = match r.read(&mut buf[len..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        len += n;
        let whole = if n == 0 {
            len
        } else {
            memchr::memrchr(b'\n', &buf[..len]).map_or(0, |p| p + 1)
        };
        let mut at = 0;
        for nl in memchr::memchr_iter(b'\n', &buf[..whole]).chain([whole]) {
            if nl > at {
                f(&buf[at..nl]);
            }
            at = nl + 1;
        }
        buf.copy_within(whole..len, 0);
        len -= whole;
        if n == 0 {
            return Ok(());
        }
    }
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

/// A file mapped read-only: a loaded library's symbol tables are a small part of it, and reading the
/// whole of a 10 MB `postgres` into memory (its copy and the fresh pages for it) was a tenth of a short
/// diagnosis's CPU.
fn map_file(path: &Path) -> Option<memmap2::Mmap> {
    let f = std::fs::File::open(path).ok()?;
    // SAFETY: the mapping is read-only and private to this function's caller, which only parses it. What
    // mmap cannot promise is that the file keeps its length: one truncated while mapped raises SIGBUS on a
    // read past its new end. The files are executables and libraries that running processes map; package
    // managers replace them by renaming a new file over the old name, which leaves this inode whole.
    unsafe { memmap2::Mmap::map(&f) }.ok()
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
                let map = map_file(Path::new(&path))?;
                ElfSymbols::parse(&map).ok()
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
        let t = kallsyms(text.as_bytes()).unwrap();
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
        assert!(kallsyms(b"0000000000000000 T _stext\n0000000000000000 t x\n").is_none());
    }

    /// The byte parser against a plain reading of this kernel's own /proc/kallsyms: every text symbol's
    /// address is held, and each resolves to a name listed at that address.
    #[test]
    fn kallsyms_of_this_kernel() {
        let bytes = std::fs::read("/proc/kallsyms").unwrap();
        let text = String::from_utf8_lossy(&bytes);
        let mut want: HashMap<u64, Vec<&str>> = HashMap::new();
        for line in text.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            if w.len() >= 3 && matches!(w[1], "t" | "T" | "w" | "W") {
                want.entry(u64::from_str_radix(w[0], 16).unwrap())
                    .or_default()
                    .push(w[2]);
            }
        }
        let Some(t) = kallsyms(&bytes) else {
            // Addresses hidden (not root, kptr_restrict): every one read as zero.
            assert!(want.keys().all(|&a| a == 0));
            return;
        };
        assert_eq!(t.len(), want.len());
        for (addr, names) in want.iter().take(5000) {
            let got = t.lookup(*addr, 1).unwrap();
            assert!(names.contains(&got), "{addr:x}: {got} not in {names:?}");
        }
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
