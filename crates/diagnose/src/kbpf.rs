//! Kernel addresses named by the running kernel itself, only those the samples hold.
//!
//! Naming kernel frames from /proc/kallsyms makes the kernel format every one of its 100,000-200,000
//! symbols (40 ms of kernel CPU on the development machine, the larger part of a short diagnosis's cost),
//! while a diagnosis meets a few thousand distinct kernel addresses. The kernel names one address in a
//! binary search of its own tables: `%pS` in `bpf_snprintf`. A BPF program of the syscall type (run by
//! `BPF_PROG_TEST_RUN`, attached to nothing) formats each address of a batch the program's array map
//! holds (written and read through a shared mapping of the map) into `name+0xOFFSET/0xSIZE [module]`,
//! which gives the function's name and its whole range, so each function is asked for once.
//!
//! Needs CAP_BPF and CAP_PERFMON (root), Linux 5.14 or later; any failure is returned and the caller falls
//! back to the symbol tables.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Addresses per run of the program (the map's entries). The verifier walks every iteration of the loop:
/// at 256 that was a fifth of a short diagnosis's CPU (a profile), at 32 a run costs one more system call per
/// 32 new addresses.
const SLOTS: u32 = 32;
/// Bytes per entry: the address, then the text (names longer than this are cut, their range unknown).
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
}

fn bpf(cmd: u32, attr: &mut Attr) -> io::Result<i64> {
    // SAFETY: attr is a valid, writable bpf_attr of its size; pointers in it point to live memory.
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

fn fd(r: i64) -> OwnedFd {
    // SAFETY: bpf() returned a new descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(r as i32) }
}

/// One instruction: opcode, destination and source registers, offset, immediate.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    u64::from(code)
        | u64::from(dst & 0xf) << 8
        | u64::from(src & 0xf) << 12
        | u64::from(off as u16) << 16
        | u64::from(imm as u32) << 32
}

/// The program: for i in 0..min(count, SLOTS), with count the u32 its context holds, format slot i's
/// address into slot i's text with `%pS`.
fn program(map: i32, fmt: i32) -> Vec<u64> {
    const LOOP: i16 = 2;
    const NEXT: i16 = 20;
    const OUT: i16 = 22;
    let at = |i: i16, target: i16| target - i - 1;
    vec![
        insn(0x61, 8, 1, 0, 0),                      // 0: r8 = *(u32 *)(r1 + 0): count
        insn(0xb7, 6, 0, 0, 0),                      // 1: r6 = 0
        insn(0x3d, 6, 8, at(2, OUT), 0),             // 2: if r6 >= r8 goto out
        insn(0x35, 6, 0, at(3, OUT), SLOTS as i32),  // 3: if r6 >= SLOTS goto out
        insn(0x63, 10, 6, -4, 0),                    // 4: *(u32 *)(r10 - 4) = r6
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map),    // 5: r1 = the map
        0,                                           // 6
        insn(0xbf, 2, 10, 0, 0),                     // 7: r2 = r10
        insn(0x07, 2, 0, 0, -4),                     // 8: r2 += -4
        insn(0x85, 0, 0, 0, FUNC_MAP_LOOKUP_ELEM),   // 9: r0 = &slot[i]
        insn(0x15, 0, 0, at(10, NEXT), 0),           // 10: if r0 == 0 goto next
        insn(0xbf, 7, 0, 0, 0),                      // 11: r7 = r0
        insn(0xbf, 1, 7, 0, 0),                      // 12: r1 = r7
        insn(0x07, 1, 0, 0, 8),                      // 13: r1 += 8: the text
        insn(0xb7, 2, 0, 0, TEXT_BYTES),             // 14: r2 = its size
        insn(0x18, 3, BPF_PSEUDO_MAP_VALUE, 0, fmt), // 15: r3 = "%pS"
        0,                                           // 16: (offset 0 in the format map's value)
        insn(0xbf, 4, 7, 0, 0),                      // 17: r4 = r7: the address, the one argument
        insn(0xb7, 5, 0, 0, 8),                      // 18: r5 = 8
        insn(0x85, 0, 0, 0, FUNC_SNPRINTF),          // 19: bpf_snprintf
        insn(0x07, 6, 0, 0, 1),                      // 20 (next): r6 += 1
        insn(0x05, 0, 0, at(21, LOOP), 0),           // 21: goto loop
        insn(0xb7, 0, 0, 0, 0),                      // 22 (out): r0 = 0
        insn(0x95, 0, 0, 0, 0),                      // 23: exit
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
    /// Loads the program; the error says which step failed and why.
    pub fn open() -> Result<Self, String> {
        let step = |what: &'static str| move |e: io::Error| format!("{what}: {e}");
        let map = fd(bpf(
            BPF_MAP_CREATE,
            &mut Attr::new()
                .u32(0, BPF_MAP_TYPE_ARRAY)
                .u32(4, 4)
                .u32(8, SLOT_BYTES as u32)
                .u32(12, SLOTS)
                .u32(16, BPF_F_MMAPABLE),
        )
        .map_err(step("creating its map"))?);
        let fmt = fd(bpf(
            BPF_MAP_CREATE,
            &mut Attr::new()
                .u32(0, BPF_MAP_TYPE_ARRAY)
                .u32(4, 4)
                .u32(8, 8)
                .u32(12, 1)
                .u32(16, BPF_F_RDONLY_PROG),
        )
        .map_err(step("creating its format map"))?);
        let key = 0u32;
        let value = *b"%pS\0\0\0\0\0";
        bpf(
            BPF_MAP_UPDATE_ELEM,
            &mut Attr::new()
                .u32(0, fmt.as_raw_fd() as u32)
                .u64(8, &key as *const u32 as u64)
                .u64(16, value.as_ptr() as u64),
        )
        .map_err(step("writing its format"))?;
        bpf(
            BPF_MAP_FREEZE,
            &mut Attr::new().u32(0, fmt.as_raw_fd() as u32),
        )
        .map_err(step("freezing its format"))?;
        let insns = program(map.as_raw_fd(), fmt.as_raw_fd());
        let license = b"Dual MIT/GPL\0";
        let mut log = vec![0u8; 1 << 16];
        let load = |log: Option<&mut Vec<u8>>| {
            let mut a = Attr::new()
                .u32(0, BPF_PROG_TYPE_SYSCALL)
                .u32(4, insns.len() as u32)
                .u64(8, insns.as_ptr() as u64)
                .u64(16, license.as_ptr() as u64)
                .u32(44, BPF_F_SLEEPABLE);
            if let Some(l) = log {
                a = a
                    .u32(24, 1)
                    .u32(28, l.len() as u32)
                    .u64(32, l.as_mut_ptr() as u64);
            }
            bpf(BPF_PROG_LOAD, &mut a)
        };
        let prog = match load(None) {
            Ok(p) => fd(p),
            Err(e) => {
                // Again with the verifier's log, for the reason.
                let _ = load(Some(&mut log));
                let text =
                    String::from_utf8_lossy(&log[..log.iter().position(|&b| b == 0).unwrap_or(0)]);
                let last = text
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("");
                return Err(format!("loading its program: {e} {last}")
                    .trim_end()
                    .to_string());
            }
        };
        let file = std::fs::File::from(map.try_clone().map_err(step("mapping its slots"))?);
        // SAFETY: the map's memory stays mapped for as long as the mapping lives; only this process and the
        // program, which runs only inside `ask`, touch it.
        let slots = unsafe {
            memmap2::MmapOptions::new()
                .len(SLOTS as usize * SLOT_BYTES)
                .map_mut(&file)
        }
        .map_err(step("mapping its slots"))?;
        Ok(Asker {
            prog,
            _fmt: fmt,
            _map: map,
            slots,
        })
    }

    /// `%pS` of each address (at most [`SLOTS`] a run; longer lists take several).
    pub fn ask(&mut self, addrs: &[u64]) -> Result<Vec<String>, String> {
        let mut out = Vec::with_capacity(addrs.len());
        for chunk in addrs.chunks(SLOTS as usize) {
            for (i, &a) in chunk.iter().enumerate() {
                let s = &mut self.slots[i * SLOT_BYTES..(i + 1) * SLOT_BYTES];
                s[..8].copy_from_slice(&a.to_ne_bytes());
                s[8] = 0;
            }
            let count = chunk.len() as u32;
            bpf(
                BPF_PROG_TEST_RUN,
                &mut Attr::new()
                    .u32(0, self.prog.as_raw_fd() as u32)
                    .u32(40, 4)
                    .u64(48, &count as *const u32 as u64),
            )
            .map_err(|e| format!("running its program: {e}"))?;
            for i in 0..chunk.len() {
                let t = &self.slots[i * SLOT_BYTES + 8..(i + 1) * SLOT_BYTES];
                let n = t.iter().position(|&b| b == 0).unwrap_or(t.len());
                out.push(String::from_utf8_lossy(&t[..n]).into_owned());
            }
        }
        Ok(out)
    }
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

/// The functions asked about so far, by range, and the addresses the kernel had no name for.
pub struct Names {
    asker: Asker,
    funcs: BTreeMap<u64, (u64, Box<str>)>,
    unnamed: std::collections::HashSet<u64>,
    pub(crate) runs: u64,
}

impl Names {
    pub fn new(asker: Asker) -> Self {
        Names {
            asker,
            funcs: BTreeMap::new(),
            unnamed: Default::default(),
            runs: 0,
        }
    }

    fn known(&self, a: u64) -> Option<&str> {
        let (_, (end, name)) = self.funcs.range(..=a).next_back()?;
        (a < *end).then_some(&**name)
    }

    /// Asks the kernel for the addresses not named yet.
    pub fn learn(&mut self, addrs: impl IntoIterator<Item = u64>) -> Result<(), String> {
        let mut new: Vec<u64> = addrs
            .into_iter()
            .filter(|&a| self.known(a).is_none() && !self.unnamed.contains(&a))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        new.sort_unstable();
        new.dedup();
        let texts = self.asker.ask(&new)?;
        self.runs += new.len().div_ceil(SLOTS as usize) as u64;
        for (a, t) in new.into_iter().zip(texts) {
            match parse(a, &t) {
                Some((start, end, name)) => {
                    self.funcs.insert(start, (end, name.into()));
                }
                None => {
                    self.unnamed.insert(a);
                }
            }
        }
        Ok(())
    }

    /// The name of an address asked about before.
    pub fn name(&self, a: u64) -> Option<&str> {
        self.known(a)
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
        let mut names = Names::new(Asker::open().expect("BPF"));
        let step = syms.len() / 1500;
        let mut want = Vec::new();
        for w in syms.windows(2).step_by(step) {
            let ((a, name), (b, _)) = (w[0], w[1]);
            if b > a + 1 {
                want.push((a, name, a));
                want.push((a + (b - a) / 2, name, a));
            }
        }
        names.learn(want.iter().map(|w| w.0)).unwrap();
        assert!(names.runs >= 2, "{} runs", names.runs);
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
