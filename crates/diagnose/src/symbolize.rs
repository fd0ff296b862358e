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
//! Kernel addresses are named from `/proc/kallsyms`; never from a `vmlinux` guessed from the release
//! (blazesym would then read `/proc/kcore` for the KASLR offset) and never through BPF: a read-only
//! diagnosis loads no BPF program and makes no `bpf(2)` call (blazesym is built without its `bpf` feature).
//! The kernel formats every line of /proc/kallsyms afresh on each read (`s_show`, `vsnprintf`): tens of
//! milliseconds of CPU, the larger part of a short diagnosis's own. So the first diagnosis of a boot keeps
//! its text symbols in [`osutil::run_dir`] (`/run/preemptlab`, a tmpfs emptied at boot; the file 0600: the
//! addresses are the boot's KASLR secret), keyed by the boot's ID and `/proc/modules` (a module loaded or
//! removed moves symbols), and later ones read that ([`KallsymsCopy`]).

use std::collections::HashMap;
use std::path::Path;

use blazesym::symbolize::source::{Elf, Kernel, Process, Source};
use blazesym::symbolize::{cache, Input, Reason, Symbolized, Symbolizer};
use blazesym::{MaybeDefault, Pid};
use hostfacts::parse::SmapsMapping;

/// Names the frames of a diagnosis's samples.
pub trait Symbolize {
    /// Learns the names of a batch of kernel addresses (one question for the batch's new ones).
    fn learn_kernel(&mut self, addrs: &mut dyn Iterator<Item = u64>);
    /// A learnt kernel address's function; None where none is known there, or kernel names are hidden.
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
    /// Does now the reading that naming the first kernel frame would do (before a window opens).
    fn warm(&mut self);
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
    kernel_names: HashMap<u64, Option<Box<str>>>,
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
    /// Readable, with the first symbol's address and the file the names are read from.
    Readable(u64, KallsymsCopy),
    Hidden(String),
}

/// Where the kernel's names are read from: this boot's copy of /proc/kallsyms's text symbols, or
/// /proc/kallsyms itself where no copy can be kept (not root, the directory not writable).
#[derive(Debug, Clone)]
pub struct KallsymsCopy {
    /// The file blazesym reads.
    pub path: std::path::PathBuf,
    /// How it came to be: `/proc/kallsyms`, `made now`, `this boot's copy`.
    pub how: String,
}

impl KallsymsCopy {
    /// This boot's copy under `dir`, made from `kallsyms` when missing; `kallsyms` itself when none can
    /// be kept there.
    pub fn get(kallsyms: &Path, dir: &Path) -> KallsymsCopy {
        let direct = |why: String| KallsymsCopy {
            path: kallsyms.to_path_buf(),
            how: format!("{} ({why})", kallsyms.display()),
        };
        let Ok(boot) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") else {
            return direct("no boot ID to key a copy by".into());
        };
        // A kernel built without modules has no /proc/modules, and its symbols never move.
        let modules = match std::fs::read("/proc/modules") {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return direct(format!("/proc/modules: {e}")),
        };
        let key = format!("kallsyms-{}-{:016x}", boot.trim(), fnv1a(&modules));
        let path = dir.join(&key);
        if is_ours(&path) {
            return KallsymsCopy {
                how: format!("{} (this boot's copy of /proc/kallsyms)", path.display()),
                path,
            };
        }
        match make_copy(kallsyms, dir, &key) {
            Ok(()) => KallsymsCopy {
                how: format!("{} (copied from /proc/kallsyms now)", path.display()),
                path,
            },
            Err(e) => direct(format!("no copy kept in {}: {e}", dir.display())),
        }
    }
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

/// Writes the text symbols of `kallsyms` (types t, T, w, W, but the padding's `__pfx_`; module tags
/// kept) to `dir/key`, 0600,
/// through a temporary file renamed into place; removes the copies of other boots and module lists.
fn make_copy(kallsyms: &Path, dir: &Path, key: &str) -> std::io::Result<()> {
    use std::io::{BufRead, Write};
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{key}.{}", std::process::id()));
    let out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    let written = (|| {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, out);
        let r = std::io::BufReader::with_capacity(1 << 18, std::fs::File::open(kallsyms)?);
        for line in r.split(b'\n') {
            let line = line?;
            let sp = line.iter().position(|&b| b == b' ');
            let ty = sp.and_then(|i| line.get(i + 1));
            // `__pfx_NAME` marks the padding before every function since 6.2 (CONFIG_FUNCTION_PADDING):
            // half of the lines, and never the function a sampled instruction is in.
            let pfx = sp
                .and_then(|i| line.get(i + 3..))
                .is_some_and(|n| n.starts_with(b"__pfx_"));
            if matches!(ty, Some(b't' | b'T' | b'w' | b'W')) && !pfx {
                w.write_all(&line)?;
                w.write_all(b"\n")?;
            }
        }
        w.into_inner().map_err(|e| e.into_error())?.sync_all()
    })();
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, dir.join(key))) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("kallsyms-") && name != key {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(())
}

impl Blaze {
    /// A symbolizer for the running kernel; kernel names are hidden when /proc/kallsyms shows no
    /// addresses to this process (not root, or `kernel.kptr_restrict` 2).
    pub fn new() -> Self {
        Blaze {
            sym: Symbolizer::builder()
                .enable_code_info(false)
                .enable_inlined_fns(false)
                .enable_demangling(false)
                .build(),
            kallsyms: kallsyms_state(Path::new("/proc/kallsyms"), &osutil::run_dir()),
            kernel_names: HashMap::new(),
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
        Some(a) if a != 0 => KallsymsState::Readable(a, KallsymsCopy::get(path, dir)),
        _ => KallsymsState::Hidden(format!(
            "{} shows no addresses (needs root, or kernel.kptr_restrict < 2)",
            path.display()
        )),
    }
}

impl Symbolize for Blaze {
    fn learn_kernel(&mut self, addrs: &mut dyn Iterator<Item = u64>) {
        if !self.kernel_available() {
            return;
        }
        let mut new: Vec<u64> = addrs
            .filter(|a| !self.kernel_names.contains_key(a))
            .collect();
        if new.is_empty() {
            return;
        }
        new.sort_unstable();
        new.dedup();
        let KallsymsState::Readable(_, copy) = &self.kallsyms else {
            return;
        };
        let src = Source::Kernel(Kernel {
            kallsyms: MaybeDefault::Some(copy.path.clone()),
            vmlinux: MaybeDefault::None,
            kaslr_offset: Some(0),
            debug_syms: false,
            _non_exhaustive: (),
        });
        match self.sym.symbolize(&src, Input::AbsAddr(&new)) {
            Ok(syms) => {
                for (a, s) in new.iter().zip(syms) {
                    let name = match s {
                        Symbolized::Sym(s) => Some(s.name.into_owned().into_boxed_str()),
                        Symbolized::Unknown(_) => None,
                    };
                    self.kernel_names.insert(*a, name);
                }
            }
            Err(e) => self.kallsyms = KallsymsState::Hidden(format!("/proc/kallsyms: {e}")),
        }
    }

    fn kernel(&self, addr: u64) -> Option<&str> {
        self.kernel_names.get(&addr)?.as_deref()
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
            KallsymsState::Readable(_, copy) => &copy.how,
            KallsymsState::Hidden(why) => why,
        }
    }

    fn unmeasured(&self) -> Option<results::diagnose::Unmeasured> {
        match &self.kallsyms {
            KallsymsState::Readable(..) => None,
            KallsymsState::Hidden(why) => Some(hidden(why)),
        }
    }

    fn warm(&mut self) {
        if let KallsymsState::Readable(first, _) = self.kallsyms {
            self.learn_kernel(&mut std::iter::once(first));
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
        let mut b = Blaze::new();
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
        b.learn_kernel(&mut want.iter().map(|(a, _)| *a));
        let mut same = 0;
        for (a, n) in &want {
            // Aliases share an address: any of the names listed there is right.
            let got = b.kernel(*a).unwrap_or("?");
            if text.contains(&format!("{a:016x} t {got}\n"))
                || text.contains(&format!("{a:016x} T {got}\n"))
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
            KallsymsState::Readable(0xffffffff81000000, _)
        ));
    }

    /// The copy holds the text symbols alone, 0600; the next diagnosis of the boot reads it, and a copy of
    /// another boot or module list is removed when a new one is made.
    #[test]
    fn this_boots_copy_of_kallsyms() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("kallsyms");
        std::fs::write(
            &src,
            "ffffffff81000000 T _stext\nffffffff81000010 t __pfx_f\nffffffff82000000 D some_data\n\
             ffffffffc0000000 t mod_fn\t[mod]\n",
        )
        .unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::fs::write(run.join("kallsyms-old-boot"), "x").unwrap();
        let first = KallsymsCopy::get(&src, &run);
        assert!(
            first.how.contains("copied from /proc/kallsyms now"),
            "{}",
            first.how
        );
        let text = std::fs::read_to_string(&first.path).unwrap();
        assert_eq!(
            text,
            "ffffffff81000000 T _stext\nffffffffc0000000 t mod_fn\t[mod]\n"
        );
        let mode = std::fs::metadata(&first.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!run.join("kallsyms-old-boot").exists());
        let again = KallsymsCopy::get(&src, &run);
        assert_eq!(again.path, first.path);
        assert!(again.how.contains("this boot's copy"), "{}", again.how);
        // Where nothing can be kept, /proc/kallsyms itself.
        let none = KallsymsCopy::get(&src, Path::new("/proc/no/such/dir"));
        assert_eq!(none.path, src);
    }
}
