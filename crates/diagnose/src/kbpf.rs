//! Kernel addresses named by the running kernel itself, only those the samples hold.
//!
//! Naming kernel frames from /proc/kallsyms makes the kernel format every one of its 100,000-200,000
//! symbols (40 ms of kernel CPU on the development machine, the larger part of a short diagnosis's cost),
//! while a diagnosis meets a few thousand distinct kernel addresses. The kernel names one address in a
//! binary search of its own tables: `%pS` in `bpf_snprintf`. A BPF program of the syscall type (run by
//! `BPF_PROG_TEST_RUN`, attached to nothing) formats each address of a batch the program's array map
//! holds (written and read through a shared mapping of the map) into `name+0xOFFSET/0xSIZE [module]`,
//! which gives the function's name and its whole range, so a function is asked about at most once per batch
//! and never again after.
//!
//! Needs CAP_BPF and CAP_PERFMON (root) and a kernel of 5.14 or later built with BPF, networking (where
//! `BPF_PROG_TEST_RUN` lives) and kallsyms; [`Asker::open`] checks the answer for one address /proc/kallsyms
//! names, and any failure is returned so that the caller falls back to the symbol tables. Names longer than a
//! slot's text (248 bytes; the kernel allows 512) come back cut, with a one-byte range, so their other
//! addresses are asked again.

use std::collections::{BTreeMap, HashSet};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Addresses per run of the program (the map's entries). The verifier walks every iteration of the loop:
/// at 256 that was a fifth of a short diagnosis's CPU (a profile), at 32 a run costs one more system call per
/// 32 new addresses.
const SLOTS: u32 = 32;
/// Bytes per entry: the address, then the text.
const SLOT_BYTES: usize = 256;
const TEXT_BYTES: i32 = SLOT_BYTES as i32 - 8;

// bpf(2) commands, types and flags (include/uapi/linux/bpf.h).
const BPF_MAP_CREATE: u32 = 0;
const BPF_MAP_UPDATE_ELEM: u32 = 2;
const BPF_PROG_LOAD: u32 = 5;
const BPF_PROG_TEST_RUN: u32 = 10;
const BPF_MAP_FREEZE: u32 = 22;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_PROG_TYPE_SYSCALL: u32 = 31;
const BPF_F_SLEEPABLE: u32 = 1 << 4;
const BPF_F_RDONLY_PROG: u32 = 1 << 7;
const BPF_F_MMAPABLE: u32 = 1 << 10;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_PSEUDO_MAP_VALUE: u8 = 2;
const FUNC_MAP_LOOKUP_ELEM: i32 = 1;
const FUNC_SNPRINTF: i32 = 165;

/// Why the kernel could not be asked: the step that failed and the kernel's answer.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {why}")]
pub struct AskError {
    step: &'static str,
    why: String,
}

fn failed(step: &'static str) -> impl Fn(io::Error) -> AskError {
    move |e| AskError {
        step,
        why: e.to_string(),
    }
}

/// `union bpf_attr`, as bytes: each command's fields at their offsets, the rest zero (the kernel refuses
/// non-zero bytes past a command's last field).
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Self {
        Attr([0; 128])
    }
    fn u32(mut self, at: usize, v: u32) -> Self {
        self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(mut self, at: usize, v: u64) -> Self {
        self.0[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn get_u32(&self, at: usize) -> u32 {
        u32::from_ne_bytes(self.0[at..at + 4].try_into().expect("4 bytes"))
    }
}

/// bpf(2).
///
/// # Safety
/// Every pointer `attr` holds must point to live memory of the size its command reads or writes, for the
/// length of the call.
unsafe fn bpf(cmd: u32, attr: &mut Attr) -> io::Result<i64> {
    // SAFETY: attr is a writable bpf_attr of its size (the kernel may write back into it); the pointers in
    // it are the caller's promise.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr.0.as_mut_ptr(),
            attr.0.len() as libc::c_long,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// bpf(2) for a command that returns a new descriptor.
///
/// # Safety
/// As [`bpf`].
unsafe fn bpf_fd(cmd: u32, attr: &mut Attr) -> io::Result<OwnedFd> {
    // SAFETY: the caller's promise; on success the result is a new descriptor nothing else owns.
    unsafe { bpf(cmd, attr).map(|r| OwnedFd::from_raw_fd(r as i32)) }
}

/// One instruction (`struct bpf_insn`): opcode, the registers' byte (two 4-bit fields, in the order the
/// target's bitfields have them), offset and immediate in the target's byte order.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let regs = if cfg!(target_endian = "little") {
        (dst & 0xf) | (src & 0xf) << 4
    } else {
        (dst & 0xf) << 4 | (src & 0xf)
    };
    let mut b = [code, regs, 0, 0, 0, 0, 0, 0];
    b[2..4].copy_from_slice(&off.to_ne_bytes());
    b[4..8].copy_from_slice(&imm.to_ne_bytes());
    b
}

/// The program: for i in 0..min(count, SLOTS), with count the u32 its context holds, format slot i's
/// address into slot i's text with `%pS`; returns how many formats failed (`bpf_snprintf` below zero).
fn program(map: i32, fmt: i32) -> Vec<[u8; 8]> {
    const LOOP: i16 = 3;
    const NEXT: i16 = 23;
    const OUT: i16 = 25;
    let to = |i: i16, target: i16| target - i - 1;
    vec![
        insn(0x61, 8, 1, 0, 0),                      // 0: r8 = *(u32 *)(r1 + 0): count
        insn(0xb7, 6, 0, 0, 0),                      // 1: r6 = 0: i
        insn(0xb7, 9, 0, 0, 0),                      // 2: r9 = 0: failures
        insn(0x3d, 6, 8, to(3, OUT), 0),             // 3 (loop): if r6 >= r8 goto out
        insn(0x35, 6, 0, to(4, OUT), SLOTS as i32),  // 4: if r6 >= SLOTS goto out
        insn(0x63, 10, 6, -4, 0),                    // 5: *(u32 *)(r10 - 4) = r6
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map),    // 6: r1 = the map
        insn(0, 0, 0, 0, 0),                         // 7
        insn(0xbf, 2, 10, 0, 0),                     // 8: r2 = r10
        insn(0x07, 2, 0, 0, -4),                     // 9: r2 += -4
        insn(0x85, 0, 0, 0, FUNC_MAP_LOOKUP_ELEM),   // 10: r0 = &slot[i]
        insn(0x15, 0, 0, to(11, NEXT), 0),           // 11: if r0 == 0 goto next
        insn(0xbf, 7, 0, 0, 0),                      // 12: r7 = r0
        insn(0xbf, 1, 7, 0, 0),                      // 13: r1 = r7
        insn(0x07, 1, 0, 0, 8),                      // 14: r1 += 8: the text
        insn(0xb7, 2, 0, 0, TEXT_BYTES),             // 15: r2 = its size
        insn(0x18, 3, BPF_PSEUDO_MAP_VALUE, 0, fmt), // 16: r3 = "%pS"
        insn(0, 0, 0, 0, 0),                         // 17: (offset 0 in the format map's value)
        insn(0xbf, 4, 7, 0, 0),                      // 18: r4 = r7: the address, the one argument
        insn(0xb7, 5, 0, 0, 8),                      // 19: r5 = 8
        insn(0x85, 0, 0, 0, FUNC_SNPRINTF),          // 20: bpf_snprintf
        insn(0x75, 0, 0, 1, 0),                      // 21: if r0 s>= 0 skip the next
        insn(0x07, 9, 0, 0, 1),                      // 22: r9 += 1
        insn(0x07, 6, 0, 0, 1),                      // 23 (next): r6 += 1
        insn(0x05, 0, 0, to(24, LOOP), 0),           // 24: goto loop
        insn(0xbf, 0, 9, 0, 0),                      // 25 (out): r0 = r9
        insn(0x95, 0, 0, 0, 0),                      // 26: exit
    ]
}

/// The loaded program, its map of slots and the slots' shared mapping.
pub struct Asker {
    prog: OwnedFd,
    _fmt: OwnedFd,
    _map: OwnedFd,
    slots: memmap2::MmapMut,
}

impl Asker {
    /// Loads the program and checks its answer for the first function /proc/kallsyms lists (where it shows
    /// addresses); the error says which step failed and why.
    pub fn open() -> Result<Self, AskError> {
        // SAFETY: these attributes hold no pointers.
        let map = unsafe {
            bpf_fd(
                BPF_MAP_CREATE,
                &mut Attr::new()
                    .u32(0, BPF_MAP_TYPE_ARRAY)
                    .u32(4, 4)
                    .u32(8, SLOT_BYTES as u32)
                    .u32(12, SLOTS)
                    .u32(16, BPF_F_MMAPABLE),
            )
        }
        .map_err(failed("creating its map"))?;
        // SAFETY: these attributes hold no pointers.
        let fmt = unsafe {
            bpf_fd(
                BPF_MAP_CREATE,
                &mut Attr::new()
                    .u32(0, BPF_MAP_TYPE_ARRAY)
                    .u32(4, 4)
                    .u32(8, 8)
                    .u32(12, 1)
                    .u32(16, BPF_F_RDONLY_PROG),
            )
        }
        .map_err(failed("creating its format map"))?;
        let key = 0u32;
        let value = *b"%pS\0\0\0\0\0";
        // SAFETY: key and value are locals of the sizes the map was made with, alive for the call.
        unsafe {
            bpf(
                BPF_MAP_UPDATE_ELEM,
                &mut Attr::new()
                    .u32(0, fmt.as_raw_fd() as u32)
                    .u64(8, &key as *const u32 as u64)
                    .u64(16, value.as_ptr() as u64),
            )
        }
        .map_err(failed("writing its format"))?;
        // SAFETY: these attributes hold no pointers.
        unsafe {
            bpf(
                BPF_MAP_FREEZE,
                &mut Attr::new().u32(0, fmt.as_raw_fd() as u32),
            )
        }
        .map_err(failed("freezing its format"))?;
        let insns: Vec<u8> = program(map.as_raw_fd(), fmt.as_raw_fd()).concat();
        let license = b"Dual MIT/GPL\0";
        let attr = || {
            Attr::new()
                .u32(0, BPF_PROG_TYPE_SYSCALL)
                .u32(4, (insns.len() / 8) as u32)
                .u64(8, insns.as_ptr() as u64)
                .u64(16, license.as_ptr() as u64)
                .u32(44, BPF_F_SLEEPABLE)
        };
        // SAFETY: the instructions and the license outlive the call.
        let prog = match unsafe { bpf_fd(BPF_PROG_LOAD, &mut attr()) } {
            Ok(p) => p,
            Err(e) => {
                // Again with the verifier's log, for the reason.
                let mut log = vec![0u8; 1 << 16];
                let mut a = attr()
                    .u32(24, 1)
                    .u32(28, log.len() as u32)
                    .u64(32, log.as_mut_ptr() as u64);
                // SAFETY: the instructions, the license and the log (of the size given) outlive the call.
                drop(unsafe { bpf_fd(BPF_PROG_LOAD, &mut a) });
                let n = log.iter().position(|&b| b == 0).unwrap_or(0);
                let text = String::from_utf8_lossy(&log[..n]);
                let last = text.lines().rev().find(|l| !l.trim().is_empty());
                return Err(AskError {
                    step: "loading its program",
                    why: match last {
                        Some(l) => format!("{e} ({l})"),
                        None => e.to_string(),
                    },
                });
            }
        };
        // SAFETY: the kernel writes the map's memory only inside BPF_PROG_TEST_RUN, which `ask` calls while
        // it holds the mapping mutably; another process would need this map's id and CAP_SYS_ADMIN.
        let slots = unsafe {
            memmap2::MmapOptions::new()
                .len(SLOTS as usize * SLOT_BYTES)
                .map_mut(&map)
        }
        .map_err(failed("mapping its slots"))?;
        let mut asker = Asker {
            prog,
            _fmt: fmt,
            _map: map,
            slots,
        };
        if let Some((addr, name)) = first_function() {
            let text = asker.ask(&[addr])?.pop().unwrap_or_default();
            if parse(addr, &text).map(|f| f.0) != Some(addr) {
                return Err(AskError {
                    step: "checking its answer",
                    why: format!("{text:?} for {addr:#x}, which /proc/kallsyms calls {name}"),
                });
            }
        }
        Ok(asker)
    }

    /// `%pS` of each address, [`SLOTS`] at most.
    fn ask(&mut self, addrs: &[u64]) -> Result<Vec<String>, AskError> {
        debug_assert!(addrs.len() <= SLOTS as usize);
        for (i, &a) in addrs.iter().enumerate() {
            let s = &mut self.slots[i * SLOT_BYTES..(i + 1) * SLOT_BYTES];
            s[..8].copy_from_slice(&a.to_ne_bytes());
            s[8] = 0;
        }
        // The kernel copies the context back after the run.
        let mut count = addrs.len() as u32;
        let mut attr = Attr::new()
            .u32(0, self.prog.as_raw_fd() as u32)
            .u32(40, 4)
            .u64(48, &mut count as *mut u32 as u64);
        // SAFETY: `count` is a live, writable u32 for the call; the slots are written by the program while
        // this function holds them mutably.
        unsafe { bpf(BPF_PROG_TEST_RUN, &mut attr) }.map_err(failed("running its program"))?;
        let failures = attr.get_u32(4);
        if failures > 0 {
            return Err(AskError {
                step: "running its program",
                why: format!(
                    "bpf_snprintf failed for {failures} of {} addresses",
                    addrs.len()
                ),
            });
        }
        Ok((0..addrs.len())
            .map(|i| {
                let t = &self.slots[i * SLOT_BYTES + 8..(i + 1) * SLOT_BYTES];
                let n = t.iter().position(|&b| b == 0).unwrap_or(t.len());
                String::from_utf8_lossy(&t[..n]).into_owned()
            })
            .collect())
    }
}

/// The first text symbol /proc/kallsyms lists, read from its first page only; None when it hides addresses.
fn first_function() -> Option<(u64, String)> {
    use std::io::Read;
    let mut buf = [0u8; 4096];
    let n = std::fs::File::open("/proc/kallsyms")
        .ok()?
        .read(&mut buf)
        .ok()?;
    buf[..n].split(|&b| b == b'\n').find_map(|l| {
        let (addr, ty, name) = crate::symbols::nm_line(l)?;
        (addr != 0 && crate::symbols::is_text(ty))
            .then(|| (addr, String::from_utf8_lossy(name).into_owned()))
    })
}

/// `%pS`'s text for `addr` as (the function's start, its end, its name): `name+0xOFF/0xSIZE`, then
/// ` [module]` for a module's function. None for an address the kernel has no symbol for (printed as the
/// bare address). A text cut short (a name longer than a slot) gives the name and a one-byte range.
pub fn parse(addr: u64, text: &str) -> Option<(u64, u64, &str)> {
    let sym = text.split(' ').next()?;
    let Some((name, rest)) = sym.rsplit_once('+') else {
        return (!sym.is_empty() && !sym.starts_with("0x")).then_some((addr, addr + 1, sym));
    };
    let hex = |s: &str| u64::from_str_radix(s.strip_prefix("0x")?, 16).ok();
    match rest
        .split_once('/')
        .and_then(|(o, s)| Some((hex(o)?, hex(s)?)))
    {
        Some((off, size)) if off <= addr && size > off => {
            Some((addr - off, addr - off + size, name))
        }
        _ => (!name.is_empty()).then_some((addr, addr + 1, name)),
    }
}

/// The kernel functions asked about so far, by range, and the addresses the kernel had no name for.
pub struct Functions {
    asker: Asker,
    funcs: BTreeMap<u64, (u64, Box<str>)>,
    unnamed: HashSet<u64>,
}

impl Functions {
    pub fn new(asker: Asker) -> Self {
        Functions {
            asker,
            funcs: BTreeMap::new(),
            unnamed: HashSet::new(),
        }
    }

    /// An address's function, if it was asked about before.
    pub fn name(&self, a: u64) -> Option<&str> {
        let (_, (end, name)) = self.funcs.range(..=a).next_back()?;
        (a < *end).then_some(&**name)
    }

    /// Asks the kernel about the addresses not named yet, in ascending order, [`SLOTS`] a run; an address
    /// inside a function an earlier run of the batch named is not asked.
    pub fn learn(&mut self, addrs: impl IntoIterator<Item = u64>) -> Result<(), AskError> {
        let mut new: Vec<u64> = addrs
            .into_iter()
            .filter(|&a| self.name(a).is_none() && !self.unnamed.contains(&a))
            .collect();
        new.sort_unstable();
        new.dedup();
        let mut rest = new.into_iter().peekable();
        while rest.peek().is_some() {
            let mut run = Vec::with_capacity(SLOTS as usize);
            while run.len() < SLOTS as usize {
                match rest.next() {
                    Some(a) if self.name(a).is_none() => run.push(a),
                    Some(_) => {}
                    None => break,
                }
            }
            if run.is_empty() {
                break;
            }
            let texts = self.asker.ask(&run)?;
            for (a, t) in run.into_iter().zip(texts) {
                match parse(a, &t) {
                    Some((start, end, name)) => {
                        self.funcs.insert(start, (end, name.into()));
                    }
                    None => {
                        self.unnamed.insert(a);
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts() {
        assert_eq!(
            parse(0x1010, "do_user_addr_fault+0x10/0x80"),
            Some((0x1000, 0x1080, "do_user_addr_fault"))
        );
        assert_eq!(
            parse(0x2000, "ext4_map_blocks+0x0/0x40 [ext4]"),
            Some((0x2000, 0x2040, "ext4_map_blocks"))
        );
        assert_eq!(parse(0x2000, "0xffffffffc0002000"), None);
        assert_eq!(
            parse(0x2000, "a_very_long_name_cut"),
            Some((0x2000, 0x2001, "a_very_long_name_cut"))
        );
        assert_eq!(parse(0x2000, "name+0x1"), Some((0x2000, 0x2001, "name")));
        assert_eq!(parse(0x2000, ""), None);
    }

    /// The kernel's own names against /proc/kallsyms for 3,000 addresses inside this kernel's functions
    /// (starts, and points inside their ranges), more than one run of the program: every one named as
    /// kallsyms names it, or as another symbol at the same address; an address in no function unnamed.
    #[test]
    fn the_kernel_names_what_kallsyms_names() {
        let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
        let mut syms: Vec<(u64, &str)> = text
            .lines()
            .filter_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w.len() >= 3 && matches!(w[1], "t" | "T" | "w" | "W"))
                    .then(|| (u64::from_str_radix(w[0], 16).unwrap(), w[2]))
            })
            .collect();
        syms.sort_unstable();
        assert!(
            syms.iter().all(|s| s.0 != 0),
            "run as root: /proc/kallsyms hides its addresses"
        );
        let mut names = Functions::new(Asker::open().expect("BPF"));
        let step = syms.len() / 1500;
        let mut want = Vec::new();
        for w in syms.windows(2).step_by(step) {
            let ((a, name), (b, _)) = (w[0], w[1]);
            if b > a + 1 {
                want.push((a, name, a));
                want.push((a + (b - a) / 2, name, a));
            }
        }
        // Many runs of the program: far more addresses than slots.
        assert!(want.len() > 10 * SLOTS as usize, "{}", want.len());
        names.learn(want.iter().map(|w| w.0)).unwrap();
        let at = |a: u64| -> Vec<&str> { syms.iter().filter(|s| s.0 == a).map(|s| s.1).collect() };
        for (addr, name, start) in &want {
            let got = names
                .name(*addr)
                .unwrap_or_else(|| panic!("{addr:#x} ({name}) unnamed"));
            assert!(
                got == *name || at(*start).contains(&got),
                "{addr:#x}: the kernel says {got}, kallsyms {name}"
            );
        }
        names.learn([8u64]).unwrap();
        assert_eq!(names.name(8), None);
    }
}
