//! Addresses to function names, user space's and the kernel's, through one small trait ([`Symbolize`]) and
//! one implementation on blazesym ([`Blaze`]).
//!
//! User addresses are named through the process that maps them, never through the path its
//! `/proc/PID/maps` line shows: that path is resolved in the mount namespace of whoever opens it, so for a
//! server in a container (Docker, a Kubernetes pod, systemd `RootDirectory=`) it names nothing or another
//! file on the host, and after a package upgrade not yet followed by a restart it names the new build while
//! the server runs the old one (`(deleted)`). blazesym opens each object as
//! `/proc/PID/map_files/START-END`, which is the mapped file itself (proc(5); readable by root, as the perf
//! events already require), and reads its `.symtab` and `.dynsym`; what they leave unnamed in a stripped
//! object, its debug file found by build ID names ([`crate::debugfile`]).
//!
//! PostgreSQL forks every process of an instance from the postmaster and never execs on Linux, so a child's
//! code addresses are the postmaster's: they are named through the postmaster, whose mappings are read once
//! (blazesym's VMA cache), and a short-lived backend's samples are named after it has exited. An address
//! outside the postmaster's mappings (a library a backend loaded itself, `plpgsql.so`) is named through the
//! process's own mappings while it lives.
//!
//! Kernel addresses are named from `/proc/kallsyms`, through this boot's table of its text symbols
//! ([`crate::ksyms`]); never from a `vmlinux` guessed from the release (blazesym would then read
//! `/proc/kcore` for the KASLR offset) and never through BPF: a read-only diagnosis loads no BPF program and
//! makes no `bpf(2)` call (blazesym is built without its `bpf` feature).

use std::collections::HashMap;
use std::path::Path;

use blazesym::symbolize::source::{Elf, Process, Source};
use blazesym::symbolize::{cache, Input, Reason, Symbolized, Symbolizer};
use blazesym::Pid;
use hostfacts::parse::SmapsMapping;

/// Names the frames of a diagnosis's samples.
pub trait Symbolize {
    /// A kernel address's function; None where none is known there, or kernel names are hidden.
    fn kernel(&self, addr: u64) -> Option<&str>;
    /// Whether kernel frames get names at all.
    fn kernel_available(&self) -> bool;
    /// The function at user address `addr` of a process of postmaster `pm`'s instance, `pid`: through the
    /// postmaster's mappings, else `pid`'s own; `FILE:?` inside a mapped file with no symbol there; None
    /// outside every mapped file.
    fn user(&mut self, pm: u32, pid: u32, addr: u64) -> Option<String>;
    /// Where kernel names came from, and why not when they did not.
    fn kernel_source(&self) -> &str;
    /// Why kernel frames have no names, if they have none.
    fn unmeasured(&self) -> Option<results::diagnose::Unmeasured>;
    /// Reads postmaster `pm`'s mappings now and holds them: its children's addresses are named through
    /// them for the rest of the diagnosis, after they exit too.
    fn hold(&mut self, pm: u32);
}

/// Why kernel frames have no names, as a result's unmeasured line.
fn hidden(why: &str) -> results::diagnose::Unmeasured {
    results::diagnose::Unmeasured {
        what: "kernel frames by name (page-fault and scheduler shares, how switches came about)"
            .into(),
        why: why.into(),
    }
}

/// [`Symbolize`] on blazesym.
pub struct Blaze {
    sym: Symbolizer,
    kallsyms: KallsymsState,
    /// (process the address was named through, address) -> name.
    user_names: HashMap<(u32, u64), Option<String>>,
    /// Processes whose mappings are held (the postmasters).
    held: HashMap<u32, Vec<SmapsMapping>>,
    /// Other processes' executable mappings, read once each.
    own: HashMap<u32, Vec<SmapsMapping>>,
    /// Debug files by build ID, for what an object's own tables leave unnamed.
    debug: crate::debugfile::DebugFiles,
}

enum KallsymsState {
    /// Readable: this boot's table, and where it came from.
    Readable(crate::ksyms::Kept),
    Hidden(String),
}

impl Blaze {
    /// A symbolizer for the running kernel, its table of kernel names read (or made, the first time in a
    /// boot) now; kernel names are hidden when /proc/kallsyms shows no addresses to this process (not
    /// root, or `kernel.kptr_restrict` 2).
    pub fn new() -> Self {
        Blaze {
            sym: Symbolizer::builder()
                .enable_code_info(false)
                .enable_inlined_fns(false)
                .enable_demangling(false)
                .build(),
            kallsyms: kallsyms_state(Path::new("/proc/kallsyms"), &osutil::run_dir()),
            user_names: HashMap::new(),
            held: HashMap::new(),
            own: HashMap::new(),
            debug: crate::debugfile::DebugFiles::default(),
        }
    }

    fn through(&mut self, via: u32, addr: u64) -> Result<Option<String>, Reason> {
        if let Some(n) = self.user_names.get(&(via, addr)) {
            return Ok(n.clone());
        }
        let src = Source::Process(Process {
            pid: Pid::from(via),
            // The object's own tables; a debug file's are read by `named_by_debug_file` (its `.symtab` alone).
            debug_syms: false,
            perf_map: false,
            map_files: true,
            vdso: true,
            _non_exhaustive: (),
        });
        let name = match self.sym.symbolize_single(&src, Input::AbsAddr(addr)) {
            Ok(Symbolized::Sym(s)) => Some(s.name.into_owned()),
            Ok(Symbolized::Unknown(Reason::Unmapped)) => return Err(Reason::Unmapped),
            Ok(Symbolized::Unknown(_)) | Err(_) => self.named_by_debug_file(via, addr),
        };
        self.user_names.insert((via, addr), name.clone());
        Ok(name)
    }

    /// The name the object's debug file (found by its build ID) gives `addr`, for a stripped object.
    fn named_by_debug_file(&mut self, via: u32, addr: u64) -> Option<String> {
        let maps = self.held.get(&via).or_else(|| self.own.get(&via))?;
        let m = maps.iter().find(|m| addr >= m.start && addr < m.end)?;
        let (path, vaddr) = self.debug.locate(via, m, addr)?;
        let src = Source::Elf(Elf {
            debug_syms: false,
            ..Elf::new(path)
        });
        match self.sym.symbolize_single(&src, Input::VirtOffset(vaddr)) {
            Ok(Symbolized::Sym(s)) => Some(s.name.into_owned()),
            _ => None,
        }
    }
}

impl Default for Blaze {
    fn default() -> Self {
        Blaze::new()
    }
}

fn kallsyms_state(path: &Path, dir: &Path) -> KallsymsState {
    use std::io::Read;
    let mut head = vec![0u8; 4096];
    let n = match std::fs::File::open(path).and_then(|mut f| f.read(&mut head)) {
        Ok(n) => n,
        Err(e) => return KallsymsState::Hidden(format!("{}: {e}", path.display())),
    };
    let first = head[..n].split(|&b| b == b'\n').next().unwrap_or(&[]);
    let addr = first.split(|&b| b == b' ').next().unwrap_or(&[]);
    match std::str::from_utf8(addr)
        .ok()
        .and_then(|a| u64::from_str_radix(a, 16).ok())
    {
        Some(a) if a != 0 => match crate::ksyms::this_boots(path, dir) {
            Ok(kept) => KallsymsState::Readable(kept),
            Err(e) => KallsymsState::Hidden(format!("{}: {e}", path.display())),
        },
        _ => KallsymsState::Hidden(format!(
            "{} shows no addresses (needs root, or kernel.kptr_restrict < 2)",
            path.display()
        )),
    }
}

impl Symbolize for Blaze {
    fn kernel(&self, addr: u64) -> Option<&str> {
        match &self.kallsyms {
            KallsymsState::Readable(kept) => kept.table.name(addr),
            KallsymsState::Hidden(_) => None,
        }
    }

    fn kernel_available(&self) -> bool {
        matches!(self.kallsyms, KallsymsState::Readable(..))
    }

    fn user(&mut self, pm: u32, pid: u32, addr: u64) -> Option<String> {
        let via_pm = self.held.contains_key(&pm) && pm != 0;
        if via_pm {
            if let Ok(n) = self.through(pm, addr) {
                return n.or_else(|| unnamed(&self.held[&pm], addr));
            }
        }
        if pid == 0 {
            return None;
        }
        let own = self.own.entry(pid).or_insert_with(|| {
            exec_maps(&std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default())
        });
        let inside = own.iter().any(|m| addr >= m.start && addr < m.end);
        if !inside {
            return None;
        }
        match self.through(pid, addr) {
            Ok(Some(n)) => Some(n),
            _ => unnamed(&self.own[&pid], addr),
        }
    }

    fn kernel_source(&self) -> &str {
        match &self.kallsyms {
            KallsymsState::Readable(kept) => &kept.how,
            KallsymsState::Hidden(why) => why,
        }
    }

    fn unmeasured(&self) -> Option<results::diagnose::Unmeasured> {
        match &self.kallsyms {
            KallsymsState::Readable(..) => None,
            KallsymsState::Hidden(why) => Some(hidden(why)),
        }
    }

    fn hold(&mut self, pm: u32) {
        if pm == 0 || self.held.contains_key(&pm) {
            return;
        }
        let _ = self
            .sym
            .cache(&cache::Cache::Process(cache::Process::new(Pid::from(pm))));
        let maps = std::fs::read_to_string(format!("/proc/{pm}/maps")).unwrap_or_default();
        self.held.insert(pm, exec_maps(&maps));
    }
}

/// `FILE:?` for an address inside one of `maps`' files with no symbol there.
fn unnamed(maps: &[SmapsMapping], addr: u64) -> Option<String> {
    let m = maps.iter().find(|m| addr >= m.start && addr < m.end)?;
    let path = m.path.trim_end_matches(" (deleted)");
    Some(format!(
        "{}:?",
        Path::new(path)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.to_string())
    ))
}

/// The executable mappings of a process (`/proc/PID/maps` text).
pub fn exec_maps(maps_text: &str) -> Vec<SmapsMapping> {
    hostfacts::parse::smaps(maps_text)
        .into_iter()
        .filter(|m| m.perms.contains('x'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test binary's own functions are named through its own process (map_files): root reads them;
    /// as another user the names come from the same file through the mapping's path.
    #[test]
    fn names_a_function_of_this_process() {
        let mut b = Blaze::new();
        let me = std::process::id();
        b.hold(me);
        let addr = exec_maps as *const () as u64;
        let name = b.user(me, me, addr).unwrap();
        assert!(name.contains("exec_maps"), "{name}");
        assert_eq!(b.user(me, me, 8), None);
    }

    /// A static function of Debian's stripped libc is named from its debug file (libc6-dbg, which
    /// scripts/test installs): `_int_malloc`, which libc.so.6's own tables do not hold.
    #[test]
    fn a_stripped_librarys_static_function_is_named_from_its_debug_file() {
        use object::{Object, ObjectSegment, ObjectSymbol};
        let me = std::process::id();
        let maps = exec_maps(&std::fs::read_to_string("/proc/self/maps").unwrap());
        let libc = maps.iter().find(|m| m.path.contains("/libc.so.6")).unwrap();
        let data = std::fs::read(&libc.path).unwrap();
        let elf = object::File::parse(&*data).unwrap();
        let id: String = elf
            .build_id()
            .unwrap()
            .unwrap()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let dbg = format!("/usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..]);
        let dbg_data = std::fs::read(&dbg)
            .unwrap_or_else(|e| panic!("{dbg}: {e}: install libc6-dbg (scripts/test does)"));
        let dbg_elf = object::File::parse(&*dbg_data).unwrap();
        let vaddr = dbg_elf
            .symbols()
            .find(|s| s.name() == Ok("_int_malloc"))
            .expect("_int_malloc in libc's debug file")
            .address();
        assert!(
            !elf.dynamic_symbols().any(|s| s.name() == Ok("_int_malloc")),
            "libc exports it: the test would prove nothing"
        );
        let seg = elf
            .segments()
            .find(|s| vaddr >= s.address() && vaddr < s.address() + s.size())
            .unwrap();
        let off = vaddr - seg.address() + seg.file_range().0;
        let addr = libc.start + off - libc.offset + 4;
        let mut b = Blaze::new();
        b.hold(me);
        assert_eq!(b.user(me, me, addr).as_deref(), Some("_int_malloc"));
    }

    /// The kernel's names against a plain reading of /proc/kallsyms (root; as another user the addresses
    /// are hidden and so are the names).
    #[test]
    fn kernel_names_match_kallsyms() {
        let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
        let b = Blaze::new();
        let mut want: Vec<(u64, &str)> = Vec::new();
        for line in text.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            // The padding before each function (`__pfx_`) is left out of the copy on purpose: an address
            // there is named as the function before it (samples land there only where the kernel runs code
            // in the padding: call depth tracking).
            if w.len() == 3
                && matches!(w[1], "t" | "T")
                && !w[2].starts_with("__pfx_")
                && want.len() < 2000
            {
                want.push((u64::from_str_radix(w[0], 16).unwrap(), w[2]));
            }
        }
        if want.iter().all(|(a, _)| *a == 0) {
            assert!(!b.kernel_available());
            assert!(b.unmeasured().is_some());
            return;
        }
        let mut same = 0;
        for (a, n) in &want {
            // Aliases share an address: any of the names listed there is right.
            let got = b.kernel(*a).unwrap_or("?");
            if ["t", "T", "w", "W"]
                .iter()
                .any(|ty| text.contains(&format!("{a:016x} {ty} {got}\n")))
                || got == *n
            {
                same += 1;
            }
        }
        assert_eq!(same, want.len(), "named as kallsyms names them");
    }

    #[test]
    fn hidden_kallsyms_is_noticed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("kallsyms");
        std::fs::write(&p, "0000000000000000 T _stext\n0000000000000000 t x\n").unwrap();
        assert!(matches!(
            kallsyms_state(&p, dir.path()),
            KallsymsState::Hidden(_)
        ));
        std::fs::write(&p, "ffffffff81000000 T _stext\n").unwrap();
        assert!(matches!(
            kallsyms_state(&p, dir.path()),
            KallsymsState::Readable(_)
        ));
    }
}
