//! The kernel's function names, for the samples' kernel frames: asked of the running kernel for only the
//! addresses the samples hold (`crate::kbpf`, BPF) where it can be; else from the running kernel's System.map
//! when the host has it and it is provably this kernel's, else from `/proc/kallsyms`.
//!
//! `/proc/kallsyms` is always right, but the kernel formats every one of its 100,000-200,000 lines again on
//! each read (`s_show`, `vsnprintf`): 40 ms of kernel CPU on the development machine, the larger part of a
//! short diagnosis's whole CPU, all of it at the start and on the server's CPUs. Ubuntu and Fedora/RHEL
//! install the kernel's real `System.map` in /boot (Debian's is a one-line placeholder; the real one is in
//! its `-dbg` package), and reading a file costs a copy. A map holds link-time addresses; this boot's are
//! shifted by KASLR's offset, which the first 64 KB of /proc/kallsyms give (about 1,500 lines, formatted
//! for a few hundred microseconds).
//!
//! The map is used only when both checks pass, else /proc/kallsyms is read as before:
//! - every text symbol in that first part of /proc/kallsyms is in the map at one and the same offset;
//! - the kernel's code in /proc/iomem ("Kernel code", `_text` to `_etext` on x86_64, to `__init_begin` on
//!   arm64) is exactly as long as the map says: any change to any function of a rebuilt kernel moves
//!   `_etext`.
//!
//! Module frames are then named by their module (`[ext4]`) from /proc/modules, which gives each module's
//! address and size; /proc/kallsyms names their functions.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::symbols::{each_line, is_text, nm_line, NmTable, SymbolTable};

/// Where the kernel's names are read from (the live host's files, or a test's).
#[derive(Debug, Clone)]
pub struct Sources {
    /// `/proc/kallsyms`.
    pub kallsyms: PathBuf,
    /// `/proc/iomem`.
    pub iomem: PathBuf,
    /// `/proc/modules`.
    pub modules: PathBuf,
    /// Candidate System.map files, tried in order.
    pub maps: Vec<PathBuf>,
}

impl Sources {
    /// The running kernel's: its System.map where distributions and `make install` put it.
    pub fn live() -> Self {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let maps = if release.is_empty() {
            Vec::new()
        } else {
            vec![
                PathBuf::from(format!("/boot/System.map-{release}")),
                PathBuf::from(format!("/usr/lib/modules/{release}/System.map")),
                PathBuf::from(format!("/lib/modules/{release}/build/System.map")),
            ]
        };
        Sources {
            kallsyms: "/proc/kallsyms".into(),
            iomem: "/proc/iomem".into(),
            modules: "/proc/modules".into(),
            maps,
        }
    }
}

/// The kernel's function names and where they came from.
#[derive(Debug)]
pub struct KernelSymbols {
    /// None when the kernel hides its addresses (not root, or `kernel.kptr_restrict` 2).
    pub table: Option<SymbolTable>,
    /// `/proc/kallsyms`, or `System.map PATH (KASLR offset 0x...)`; with why a map present was not used.
    pub source: String,
}

fn hidden() -> results::diagnose::Unmeasured {
    results::diagnose::Unmeasured {
        what: "kernel frames by name (page-fault and scheduler shares, how switches came about)"
            .into(),
        why: "/proc/kallsyms shows no addresses (needs root, or kernel.kptr_restrict < 2)".into(),
    }
}

/// How kernel frames are named through a diagnosis, and where the names come from.
pub struct Names {
    how: How,
    source: String,
    /// Where the tables are read from should asking fail mid-window.
    src: Sources,
}

enum How {
    Asked(crate::kbpf::Functions),
    Table(Option<SymbolTable>),
}

impl Names {
    /// The kernel asked through BPF; where that cannot be set up, [`load`]'s tables (the source then says
    /// why BPF was not used).
    pub fn open(src: &Sources) -> Names {
        match crate::kbpf::Asker::open() {
            Ok(a) => Names {
                how: How::Asked(crate::kbpf::Functions::new(a)),
                source: "the running kernel, per address (BPF bpf_snprintf %pS)".into(),
                src: src.clone(),
            },
            Err(why) => {
                let k = load(src);
                Names {
                    how: How::Table(k.table),
                    source: format!("{} (BPF not used: {why})", k.source),
                    src: src.clone(),
                }
            }
        }
    }

    /// Whether kernel frames get names at all.
    pub fn available(&self) -> bool {
        !matches!(self.how, How::Table(None))
    }

    /// Where the names came from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// What is not measured without the names, and why; None when there are names.
    pub fn unmeasured(&self) -> Option<results::diagnose::Unmeasured> {
        (!self.available()).then(hidden)
    }

    /// Asks for the addresses not named yet (the tables hold them all already). Should asking fail
    /// mid-window, the rest of the window is named from [`load`]'s tables, and the source says so.
    pub fn learn(&mut self, addrs: impl IntoIterator<Item = u64>) {
        if let How::Asked(n) = &mut self.how {
            if let Err(why) = n.learn(addrs) {
                let k = load(&self.src);
                self.source = format!(
                    "{}; then, after asking failed ({why}), {}",
                    self.source, k.source
                );
                self.how = How::Table(k.table);
            }
        }
    }

    /// An address's function, as far as known.
    pub fn name(&self, addr: u64) -> Option<&str> {
        match &self.how {
            How::Asked(n) => n.name(addr),
            How::Table(t) => t.as_ref()?.lookup(addr, u64::MAX),
        }
    }
}

/// How much of /proc/kallsyms is read to check a map against.
const HEAD_BYTES: usize = 64 << 10;
/// At least this many text symbols in that part for the check to mean something.
const HEAD_MIN_SYMBOLS: usize = 100;

/// Loads the kernel's names (see the module's comment).
pub fn load(src: &Sources) -> KernelSymbols {
    let mut refused = Vec::new();
    let maps: Vec<&PathBuf> = src.maps.iter().filter(|p| p.exists()).collect();
    // The head is only for checking a map against: without one, /proc/kallsyms is read once.
    match if maps.is_empty() {
        Ok(None)
    } else {
        head(&src.kallsyms)
    } {
        Ok(Some(h)) => {
            let code_len = std::fs::read_to_string(&src.iomem)
                .ok()
                .and_then(|t| kernel_code_len(&t));
            for path in maps {
                match from_map(path, &h, code_len) {
                    Ok((mut table, offset)) => {
                        if let Ok(t) = std::fs::read_to_string(&src.modules) {
                            for (start, size, name) in modules(&t) {
                                table.push(start, size, &format!("[{name}]"));
                            }
                        }
                        return KernelSymbols {
                            table: Some(table.finish()),
                            source: format!(
                                "{} (KASLR offset {offset:#x}; modules by name)",
                                path.display()
                            ),
                        };
                    }
                    Err(why) => refused.push(format!("{}: {why}", path.display())),
                }
            }
        }
        Ok(None) => {}
        Err(_) => {
            return KernelSymbols {
                table: None,
                source: format!("{} (unreadable)", src.kallsyms.display()),
            }
        }
    }
    let table = std::fs::File::open(&src.kallsyms).ok().and_then(|f| {
        let mut t = NmTable::for_kernel();
        each_line(f, |l| t.line(l)).ok()?;
        t.finish()
    });
    let mut source = src.kallsyms.display().to_string();
    if !refused.is_empty() {
        source.push_str(&format!(" (not {})", refused.join("; ")));
    }
    KernelSymbols { table, source }
}

/// The text symbols of the first part of /proc/kallsyms, name to addresses; None when the addresses are
/// hidden (all zero).
fn head(path: &Path) -> std::io::Result<Option<Head>> {
    let mut buf = vec![0u8; HEAD_BYTES];
    let mut len = 0;
    let mut f = std::fs::File::open(path)?;
    while len < buf.len() {
        match f.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    // Only whole lines: the last may have been cut.
    let whole = buf[..len]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    Ok(Head::parse(&buf[..whole]))
}

/// The text symbols of the first part of /proc/kallsyms.
#[derive(Debug)]
struct Head {
    by_name: HashMap<Vec<u8>, Vec<u64>>,
    count: usize,
    /// The highest text address past `_text`'s.
    span: u64,
}

impl Head {
    fn parse(text: &[u8]) -> Option<Head> {
        let mut by_name: HashMap<Vec<u8>, Vec<u64>> = HashMap::new();
        let mut count = 0;
        let mut nonzero = false;
        for line in text.split(|&b| b == b'\n') {
            let Some((addr, ty, name)) = nm_line(line) else {
                continue;
            };
            nonzero |= addr != 0;
            if is_text(ty) {
                by_name.entry(name.to_vec()).or_default().push(addr);
                count += 1;
            }
        }
        let text = by_name
            .get(b"_text".as_slice())
            .and_then(|a| a.first())
            .copied();
        let span = by_name
            .values()
            .flatten()
            .map(|a| text.map_or(u64::MAX, |t| a.wrapping_sub(t)))
            .filter(|d| *d < 1 << 40)
            .max()
            .unwrap_or(u64::MAX);
        nonzero.then_some(Head {
            by_name,
            count,
            span,
        })
    }
}

/// The length of the kernel's code in `/proc/iomem` text ("Kernel code"); None when absent or hidden.
fn kernel_code_len(iomem: &str) -> Option<u64> {
    let line = iomem
        .lines()
        .find(|l| l.trim_end().ends_with(": Kernel code"))?;
    let range = line.trim().split(" : ").next()?;
    let (a, b) = range.split_once('-')?;
    let (a, b) = (
        u64::from_str_radix(a, 16).ok()?,
        u64::from_str_radix(b, 16).ok()?,
    );
    (b > a).then(|| b - a + 1)
}

/// Each loaded module's (address, size, name) from `/proc/modules` text (`NAME SIZE REFS DEPS STATE
/// ADDRESS ...`); modules whose address reads as zero (hidden) are left out.
fn modules(text: &str) -> Vec<(u64, u64, &str)> {
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let size = w.get(1)?.parse().ok()?;
            let addr = u64::from_str_radix(w.get(5)?.trim_start_matches("0x"), 16).ok()?;
            (addr != 0).then(|| (addr, size, w[0]))
        })
        .collect()
}

/// The map's text symbols moved to this boot's addresses, and the offset, when the map is this kernel's.
fn from_map(path: &Path, head: &Head, code_len: Option<u64>) -> Result<(SymbolTable, u64), String> {
    if head.count < HEAD_MIN_SYMBOLS {
        return Err(format!(
            "only {} text symbols in the first part of /proc/kallsyms to check it against",
            head.count
        ));
    }
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut t = NmTable::for_kernel();
    // (name, link-time address) of the map's symbols that the head names; and the symbols that bound the
    // kernel's code.
    let mut seen: Vec<(Vec<u8>, u64)> = Vec::new();
    let mut marks: HashMap<&'static str, u64> = HashMap::new();
    let mut text_at = None;
    each_line(f, |line| {
        let Some((addr, ty, name)) = nm_line(line) else {
            return;
        };
        for m in ["_text", "_stext", "_etext", "__init_begin"] {
            if name == m.as_bytes() {
                marks.insert(m, addr);
            }
        }
        if name == b"_text" {
            text_at = Some(addr);
        }
        // The head's symbols are the kernel's first: past them (once _text gives the offset) no line
        // needs the look-up.
        let past = text_at.is_some_and(|t: u64| addr.wrapping_sub(t) > head.span);
        if is_text(ty) && !past && head.by_name.contains_key(name) {
            seen.push((name.to_vec(), addr));
        }
        t.symbol(addr, ty, name);
    })
    .map_err(|e| e.to_string())?;
    let Some(&text) = marks.get("_text") else {
        return Err("no _text in it (a placeholder, not a map)".into());
    };
    let Some(live_text) = head
        .by_name
        .get(b"_text".as_slice())
        .and_then(|a| a.first())
    else {
        return Err("no _text in /proc/kallsyms's first part".into());
    };
    let offset = live_text.wrapping_sub(text);
    // Every symbol of the head at the one offset.
    let mut found: HashMap<&[u8], usize> = HashMap::new();
    for (name, addr) in &seen {
        if head.by_name[name].contains(&addr.wrapping_add(offset)) {
            *found.entry(name.as_slice()).or_default() += 1;
        }
    }
    if let Some((name, _)) = head
        .by_name
        .iter()
        .find(|(n, _)| !found.contains_key(n.as_slice()))
    {
        return Err(format!(
            "{} is not where /proc/kallsyms has it (another build of this release?)",
            String::from_utf8_lossy(name)
        ));
    }
    let Some(code_len) = code_len else {
        return Err("/proc/iomem shows no kernel code to check the map's size against".into());
    };
    let sizes = [
        ("_text", "_etext"),
        ("_stext", "_etext"),
        ("_text", "__init_begin"),
        ("_stext", "__init_begin"),
    ];
    let fits = sizes
        .iter()
        .any(|(a, b)| match (marks.get(a), marks.get(b)) {
            (Some(a), Some(b)) => b.wrapping_sub(*a) == code_len,
            _ => false,
        });
    if !fits {
        return Err(format!(
            "its code is not the {code_len} bytes /proc/iomem gives the running kernel's (another build?)"
        ));
    }
    let mut table = t.table;
    table.shift(offset);
    Ok((table, offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory removed when dropped.
    struct Scratch(PathBuf);
    impl Scratch {
        fn new(tag: &str) -> Self {
            let d = std::env::temp_dir()
                .join(format!("preemptlab-kernsyms-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&d).unwrap();
            Scratch(d)
        }
        fn file(&self, name: &str, text: &str) -> PathBuf {
            let p = self.0.join(name);
            std::fs::write(&p, text).unwrap();
            p
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// This kernel's System.map as a build would have written it, made from its own /proc/kallsyms:
    /// the core symbols (no `[module]`), every address `kaslr` lower (a boot that put the kernel `kaslr`
    /// above its link address), one address moved by `tamper` bytes when it is not zero.
    fn map_of_this_kernel(kallsyms: &str, kaslr: u64, tamper: i64) -> String {
        let mut out = String::new();
        let mut tampered = false;
        for line in kallsyms.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            if w.len() != 3 {
                continue;
            }
            let mut a = u64::from_str_radix(w[0], 16).unwrap().wrapping_sub(kaslr);
            // The 200th function: well inside the head the map is checked against.
            if tamper != 0 && !tampered && is_text(w[1].as_bytes()[0]) && out.lines().count() > 200
            {
                a = a.wrapping_add_signed(tamper);
                tampered = true;
            }
            out.push_str(&format!("{a:016x} {} {}\n", w[1], w[2]));
        }
        out
    }

    /// The map path against this machine's kernel: a map made from its /proc/kallsyms at a KASLR-like
    /// offset is taken, its offset found, and it names what /proc/kallsyms names; Debian's placeholder, a map
    /// with one function moved, and a kernel whose code size differs are each refused with the reason, and
    /// /proc/kallsyms is read instead.
    #[test]
    fn a_map_is_used_only_when_it_is_this_kernels() {
        let live = Sources::live();
        let text = std::fs::read_to_string(&live.kallsyms).unwrap();
        let full = crate::symbols::kallsyms(text.as_bytes());
        let Some(full) = full else {
            // Addresses hidden (not root): nothing to check a map against, and nothing is named.
            let k = load(&live);
            assert!(k.table.is_none());
            return;
        };
        let iomem = std::fs::read_to_string(&live.iomem).unwrap();
        assert!(
            kernel_code_len(&iomem).is_some(),
            "/proc/iomem shows no Kernel code line as root:\n{iomem}"
        );
        let s = Scratch::new("map");
        let kaslr = 0x2e00000u64;
        let sources = |map: PathBuf, iomem: PathBuf| Sources {
            kallsyms: live.kallsyms.clone(),
            iomem,
            modules: live.modules.clone(),
            maps: vec![s.0.join("absent"), map],
        };
        let real_iomem = live.iomem.clone();

        let good = s.file("System.map", &map_of_this_kernel(&text, kaslr, 0));
        let k = load(&sources(good.clone(), real_iomem.clone()));
        assert!(
            k.source.contains(&format!("KASLR offset {kaslr:#x}")),
            "{}",
            k.source
        );
        let t = k.table.unwrap();
        let mut checked = 0;
        for line in text.lines().filter(|l| !l.contains('[')).step_by(37) {
            let w: Vec<&str> = line.split_whitespace().collect();
            if !is_text(w[1].as_bytes()[0]) {
                continue;
            }
            let a = u64::from_str_radix(w[0], 16).unwrap();
            assert_eq!(t.lookup(a, 1), full.lookup(a, 1), "{line}");
            checked += 1;
        }
        assert!(checked > 1000, "{checked}");

        let placeholder = s.file(
            "System.map-placeholder",
            "ffffffffffffffff B The real System.map is in the linux-image-dbg package\n",
        );
        let k = load(&sources(placeholder, real_iomem.clone()));
        assert!(k.source.starts_with("/proc/kallsyms (not "), "{}", k.source);
        assert!(k.source.contains("placeholder"), "{}", k.source);
        assert_eq!(k.table.unwrap().len(), full.len());

        let moved = s.file("System.map-moved", &map_of_this_kernel(&text, kaslr, 16));
        let k = load(&sources(moved, real_iomem));
        assert!(
            k.source.contains("is not where /proc/kallsyms has it"),
            "{}",
            k.source
        );
        assert_eq!(k.table.unwrap().len(), full.len());

        let code = kernel_code_len(&iomem).unwrap();
        let bigger = s.file(
            "iomem",
            &format!("  01000000-{:08x} : Kernel code\n", 0x1000000 + code),
        );
        let k = load(&sources(good, bigger));
        assert!(
            k.source.contains(&format!("not the {} bytes", code + 1)),
            "{}",
            k.source
        );
        assert_eq!(k.table.unwrap().len(), full.len());
    }

    #[test]
    fn iomem_and_modules_text() {
        let iomem = "00000000-00000fff : Reserved\n100000000-47fffffff : System RAM\n  \
                     01000000-0220bb07 : Kernel code\n  02400000-02e09fff : Kernel rodata\n";
        assert_eq!(kernel_code_len(iomem), Some(0x120bb08));
        assert_eq!(kernel_code_len("  00000000-00000000 : Kernel code\n"), None);
        assert_eq!(kernel_code_len("00000000-00000fff : Reserved\n"), None);
        let m = "virtio_net 86016 0 - Live 0xffffffffc0a3e000\next4 1118208 1 mbcache,jbd2, Live 0xffffffffc0400000 (E)\n\
                 hidden 4096 0 - Live 0x0000000000000000\n";
        assert_eq!(
            modules(m),
            vec![
                (0xffffffffc0a3e000, 86016, "virtio_net"),
                (0xffffffffc0400000, 1118208, "ext4")
            ]
        );
    }
}
