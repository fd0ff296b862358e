//! The guest's architecture: x86_64 guests share the host's root filesystem and run this binary; arm64 guests
//! (`--arch arm64`) boot an arm64 kernel under `qemu-system-aarch64 -M virt -cpu max` (TCG: the host is
//! x86_64) on an arm64 root filesystem (`scripts/arm64-root`) and run the cross-built arm64 binary
//! (`scripts/cross-arm64`), handed in at boot.
//!
//! A kernel's architecture is read from its config (`CONFIG_ARM64=y`, `CONFIG_X86_64=y`), else from the
//! image's header: an arm64 `Image` carries the magic `ARM\x64` at offset 0x38
//! (Documentation/arch/arm64/booting.rst), an x86 bzImage `HdrS` at 0x202 (Documentation/arch/x86/boot.rst),
//! and a PE image (an EFI zboot arm64 kernel) names its machine, 0xaa64 or 0x8664, in its COFF header.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::VmError;

/// An architecture a guest can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GuestArch {
    /// x86_64 (Debian: amd64).
    X86_64,
    /// arm64 (aarch64).
    Arm64,
}

/// Where `scripts/arm64-root` makes the arm64 root filesystem.
pub const DEFAULT_ARM64_ROOT: &str = "/var/cache/preemptlab/arm64-root";

/// What `scripts/arm64-root` leaves in a root it finished making.
pub const ROOT_COMPLETE: &str = ".preemptlab-complete";

/// The Rust target `scripts/cross-arm64` builds for.
pub const ARM64_TRIPLE: &str = "aarch64-unknown-linux-gnu";

impl GuestArch {
    /// `x86_64`, `amd64`; `arm64`, `aarch64` (None: not one of them).
    pub fn parse(s: &str) -> Option<GuestArch> {
        match s {
            "x86_64" | "amd64" | "x86-64" => Some(GuestArch::X86_64),
            "arm64" | "aarch64" => Some(GuestArch::Arm64),
            _ => None,
        }
    }

    /// The architecture this binary was built for (the host's, as it runs here).
    pub fn host() -> Option<GuestArch> {
        Self::parse(std::env::consts::ARCH)
    }

    /// The name the project uses: `x86_64`, `arm64`.
    pub fn as_str(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "x86_64",
            GuestArch::Arm64 => "arm64",
        }
    }

    /// The kernel's name of it (`uname -m`): `x86_64`, `aarch64`.
    pub fn uname(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "x86_64",
            GuestArch::Arm64 => "aarch64",
        }
    }

    /// QEMU's system emulator for it, and the Debian package that has it.
    pub fn qemu(self) -> (&'static str, &'static str) {
        match self {
            GuestArch::X86_64 => ("qemu-system-x86_64", "qemu-system-x86"),
            GuestArch::Arm64 => ("qemu-system-aarch64", "qemu-system-arm"),
        }
    }
}

impl std::fmt::Display for GuestArch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kernel's architecture from its config (pure; None when the config names neither).
pub fn from_config(cfg: &BTreeMap<String, String>) -> Option<GuestArch> {
    let on = |k: &str| cfg.get(k).map(String::as_str) == Some("y");
    if on("CONFIG_ARM64") {
        Some(GuestArch::Arm64)
    } else if on("CONFIG_X86_64") {
        Some(GuestArch::X86_64)
    } else {
        None
    }
}

/// A kernel's architecture from the first bytes of its image (pure; at least 0x210 bytes to tell all three
/// kinds apart; None when none matches).
pub fn from_image_header(head: &[u8]) -> Option<GuestArch> {
    let at = |off: usize, magic: &[u8]| head.get(off..off + magic.len()) == Some(magic);
    if at(0x38, b"ARM\x64") {
        return Some(GuestArch::Arm64);
    }
    if at(0x202, b"HdrS") {
        return Some(GuestArch::X86_64);
    }
    // PE: "MZ", the COFF header's offset at 0x3c, "PE\0\0", then the machine (u16 little-endian).
    if at(0, b"MZ") {
        let pe = u32::from_le_bytes(head.get(0x3c..0x40)?.try_into().ok()?) as usize;
        if at(pe, b"PE\0\0") {
            let m = u16::from_le_bytes(head.get(pe + 4..pe + 6)?.try_into().ok()?);
            return match m {
                0xaa64 => Some(GuestArch::Arm64),
                0x8664 => Some(GuestArch::X86_64),
                _ => None,
            };
        }
    }
    None
}

/// A kernel's architecture: its config's word, else its image's header.
pub fn of_kernel(config: Option<&Path>, image: &Path) -> Option<GuestArch> {
    let cfg = config
        .and_then(|c| std::fs::read_to_string(c).ok())
        .map(|t| hostfacts::parse::kernel_config(&t));
    if let Some(a) = cfg.as_ref().and_then(from_config) {
        return Some(a);
    }
    use std::io::Read;
    let mut head = vec![0u8; 4096];
    let n = std::fs::File::open(image)
        .and_then(|mut f| f.read(&mut head))
        .ok()?;
    from_image_header(&head[..n])
}

/// The arm64 root filesystem in use: `root` when given, else `$PREEMPTLAB_ARM64_ROOT`, else
/// [`DEFAULT_ARM64_ROOT`].
pub fn arm64_root(root: Option<&Path>) -> PathBuf {
    root.map(Path::to_path_buf)
        .or_else(|| {
            std::env::var_os("PREEMPTLAB_ARM64_ROOT")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .unwrap_or_else(|| PathBuf::from(DEFAULT_ARM64_ROOT))
}

/// Where the arm64 binary is looked for, in order (pure): `given`; the cross-built one in the target
/// directory of `exe` when `exe` is a cargo build (`<target>/{debug,release}/preemptlab` ->
/// `<target>/aarch64-unknown-linux-gnu/release/preemptlab`, then `.../debug/...`); the one installed in the
/// root (`/usr/bin/preemptlab` of the arm64 root, from the arm64 package).
pub fn guest_exe_candidates(given: Option<&Path>, exe: &Path, root: &Path) -> Vec<PathBuf> {
    if let Some(g) = given {
        return vec![g.to_path_buf()];
    }
    let mut v = Vec::new();
    let profile_dir = exe.parent();
    let is_profile = profile_dir
        .and_then(Path::file_name)
        .is_some_and(|n| n == "debug" || n == "release");
    if let (true, Some(target)) = (is_profile, profile_dir.and_then(Path::parent)) {
        for profile in ["release", "debug"] {
            v.push(target.join(ARM64_TRIPLE).join(profile).join("preemptlab"));
        }
    }
    v.push(root.join("usr/bin/preemptlab"));
    v
}

/// Whether an ELF file is an aarch64 executable (its header's `e_machine`, 183, EM_AARCH64).
pub fn is_aarch64_elf(head: &[u8]) -> bool {
    head.len() >= 20
        && head.starts_with(b"\x7fELF")
        && head[5] == 1 // little-endian
        && u16::from_le_bytes([head[18], head[19]]) == 183
}

/// QEMU's CPU for an arm64 guest: every feature QEMU emulates (LSE atomics, the generic timer, PMU), where
/// virtme-ng's own default under TCG is a Cortex-A57 (ARMv8.0, no LSE). QEMU takes the last `-cpu`.
pub const ARM64_QEMU_CPU: &str = "-cpu max";

/// An arm64 guest's parts, found and checked before anything boots.
#[derive(Debug, Clone)]
pub struct Arm64Guest {
    /// The root filesystem.
    pub root: PathBuf,
    /// The arm64 binary on the host.
    pub exe: PathBuf,
}

impl Arm64Guest {
    /// Finds the root (finished by `scripts/arm64-root`) and the arm64 binary ([`guest_exe_candidates`],
    /// an aarch64 ELF), or says which is missing and what makes it.
    pub fn find(
        root: Option<&Path>,
        given_exe: Option<&Path>,
        exe: &Path,
    ) -> Result<Arm64Guest, VmError> {
        let root = arm64_root(root);
        if !root.join(ROOT_COMPLETE).is_file() {
            return Err(VmError::NoRoot { path: root });
        }
        let candidates = guest_exe_candidates(given_exe, exe, &root);
        let Some(found) = candidates.iter().find(|p| p.is_file()) else {
            if let Some(g) = given_exe {
                return Err(VmError::Io {
                    what: format!("reading {}", g.display()),
                    source: std::io::Error::from(std::io::ErrorKind::NotFound),
                });
            }
            return Err(VmError::NoGuestExe {
                searched: candidates.iter().map(|p| p.display().to_string()).collect(),
            });
        };
        use std::io::Read;
        let mut head = [0u8; 64];
        let n = std::fs::File::open(found)
            .and_then(|mut f| f.read(&mut head))
            .map_err(|e| VmError::io(format!("reading {}", found.display()), e))?;
        if !is_aarch64_elf(&head[..n]) {
            return Err(VmError::NotAGuestExe {
                path: found.clone(),
                arch: GuestArch::Arm64,
            });
        }
        Ok(Arm64Guest {
            root,
            exe: found.clone(),
        })
    }

    /// Copies the binary into `<tmp>/arm64-bin/` (a directory the guest gets read-only, under /tmp, which
    /// the guest has as its own tmpfs) and returns the copy's path: the guest sees neither the host's
    /// checkout nor its cache, and a rebuild on the host while the guest runs changes nothing under it.
    pub fn hand_in(&self, tmp: &Path) -> Result<PathBuf, VmError> {
        let dir = tmp.join("arm64-bin");
        std::fs::create_dir(&dir)
            .map_err(|e| VmError::io(format!("creating {}", dir.display()), e))?;
        let dest = dir.join("preemptlab");
        std::fs::copy(&self.exe, &dest).map_err(|e| {
            VmError::io(
                format!("copying {} to {}", self.exe.display(), dest.display()),
                e,
            )
        })?;
        Ok(dest)
    }

    /// virtme-ng's arguments with this guest's: the architecture, the root, QEMU's CPU (before `--exec`),
    /// and every `--rwdir`/`--rodir` given as `GUESTPATH=HOSTPATH` (the same path): with a root of its own,
    /// virtme-ng reads a bare path as one inside that root and refuses any other.
    pub fn vng_args(&self, mut args: Vec<String>) -> Vec<String> {
        for i in 1..args.len() {
            if matches!(args[i - 1].as_str(), "--rwdir" | "--rodir") && !args[i].contains('=') {
                args[i] = format!("{0}={0}", args[i]);
            }
        }
        let at = args
            .iter()
            .position(|a| a == "--exec")
            .unwrap_or(args.len());
        let extra = [
            "--arch".to_string(),
            "arm64".to_string(),
            "--root".to_string(),
            self.root.display().to_string(),
            format!("--qemu-opts={ARM64_QEMU_CPU}"),
        ];
        args.splice(at..at, extra);
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases() {
        assert_eq!(GuestArch::parse("aarch64"), Some(GuestArch::Arm64));
        assert_eq!(GuestArch::parse("amd64"), Some(GuestArch::X86_64));
        assert_eq!(GuestArch::parse("sparc"), None);
        assert_eq!(GuestArch::Arm64.qemu().0, "qemu-system-aarch64");
        assert_eq!(GuestArch::Arm64.uname(), "aarch64");
    }

    #[test]
    fn the_architecture_of_a_config_and_an_image() {
        let cfg = |t: &str| hostfacts::parse::kernel_config(t);
        assert_eq!(
            from_config(&cfg("CONFIG_ARM64=y\nCONFIG_HZ=250\n")),
            Some(GuestArch::Arm64)
        );
        assert_eq!(
            from_config(&cfg("CONFIG_X86_64=y\n")),
            Some(GuestArch::X86_64)
        );
        assert_eq!(from_config(&cfg("CONFIG_HZ=250\n")), None);
        let mut arm = vec![0u8; 0x240];
        arm[0x38..0x3c].copy_from_slice(b"ARM\x64");
        assert_eq!(from_image_header(&arm), Some(GuestArch::Arm64));
        let mut bz = vec![0u8; 0x240];
        bz[0x202..0x206].copy_from_slice(b"HdrS");
        assert_eq!(from_image_header(&bz), Some(GuestArch::X86_64));
        let mut pe = vec![0u8; 0x240];
        pe[0..2].copy_from_slice(b"MZ");
        pe[0x3c..0x40].copy_from_slice(&0x80u32.to_le_bytes());
        pe[0x80..0x84].copy_from_slice(b"PE\0\0");
        pe[0x84..0x86].copy_from_slice(&0xaa64u16.to_le_bytes());
        assert_eq!(from_image_header(&pe), Some(GuestArch::Arm64));
        assert_eq!(from_image_header(&[0u8; 16]), None);
    }

    #[test]
    fn the_arm64_binary_beside_a_cargo_build_then_the_roots() {
        let root = Path::new("/r");
        let v = guest_exe_candidates(None, Path::new("/w/target/debug/preemptlab"), root);
        assert_eq!(
            v,
            vec![
                PathBuf::from("/w/target/aarch64-unknown-linux-gnu/release/preemptlab"),
                PathBuf::from("/w/target/aarch64-unknown-linux-gnu/debug/preemptlab"),
                PathBuf::from("/r/usr/bin/preemptlab"),
            ]
        );
        let v = guest_exe_candidates(None, Path::new("/usr/bin/preemptlab"), root);
        assert_eq!(v, vec![PathBuf::from("/r/usr/bin/preemptlab")]);
        let v = guest_exe_candidates(Some(Path::new("/x")), Path::new("/usr/bin/p"), root);
        assert_eq!(v, vec![PathBuf::from("/x")]);
    }

    #[test]
    fn an_arm64_guest_is_refused_without_its_root_or_binary() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let exe = t.path().join("target/debug/preemptlab");
        let e = Arm64Guest::find(Some(&root), None, &exe).unwrap_err();
        assert!(matches!(e, VmError::NoRoot { .. }), "{e}");
        assert!(e.to_string().contains("scripts/arm64-root"), "{e}");
        std::fs::write(root.join(ROOT_COMPLETE), "").unwrap();
        let e = Arm64Guest::find(Some(&root), None, &exe).unwrap_err();
        assert!(e.to_string().contains("scripts/cross-arm64"), "{e}");
        // An x86_64 binary where the arm64 one should be.
        let cross = t.path().join("target/aarch64-unknown-linux-gnu/release");
        std::fs::create_dir_all(&cross).unwrap();
        std::fs::copy("/proc/self/exe", cross.join("preemptlab")).unwrap();
        let e = Arm64Guest::find(Some(&root), None, &exe).unwrap_err();
        if cfg!(not(target_arch = "aarch64")) {
            assert!(matches!(e, VmError::NotAGuestExe { .. }), "{e}");
        }
        let g = Arm64Guest {
            root: root.clone(),
            exe: cross.join("preemptlab"),
        };
        let args = g.vng_args(
            ["--run", "k", "--rwdir", "/tmp/s", "--exec", "x"]
                .map(String::from)
                .to_vec(),
        );
        assert_eq!(
            args.join(" "),
            format!(
                "--run k --rwdir /tmp/s=/tmp/s --arch arm64 --root {} --qemu-opts=-cpu max --exec x",
                root.display()
            )
        );
        let copied = g.hand_in(t.path()).unwrap();
        assert!(copied.ends_with("arm64-bin/preemptlab") && copied.is_file());
    }

    #[test]
    fn an_aarch64_elf_header() {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[5] = 1;
        h[18..20].copy_from_slice(&183u16.to_le_bytes());
        assert!(is_aarch64_elf(&h));
        h[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
        assert!(!is_aarch64_elf(&h));
    }
}
