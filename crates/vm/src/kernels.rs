//! Bootable kernels: discovery on disk, matching the kernel asked for, and what each kernel offers.
//!
//! Places looked at, in order:
//! - installed kernels: every release under `/lib/modules` and `/usr/lib/modules` whose image is
//!   `/boot/vmlinuz-RELEASE` or `(/usr)/lib/modules/RELEASE/vmlinuz` (Debian's usr-merged 7.x packages);
//! - the kernel cache (`$PREEMPTLAB_KERNEL_CACHE`, default `/var/cache/preemptlab/kernels`): one directory per
//!   kernel, either a package tree unpacked by `scripts/kernels fetch` (`boot/vmlinuz-R`, `usr/lib/modules/R/`)
//!   or a kernel build (`vmlinuz`, `bzImage`, `arch/x86/boot/bzImage`, or arm64's `Image` or
//!   `arch/arm64/boot/Image`, next to `config` or `.config`), named after the directory.
//!
//! Kernels of every architecture share the cache (Debian names a release after its architecture:
//! `7.2.13+deb14-amd64`, `7.2.13+deb14-arm64`); [`pick`] takes only those of the guest's architecture
//! ([`crate::arch`]) into account.
//!
//! What a kernel offers is read from its config with hostfacts' own decision
//! ([`hostfacts::kernel::decide_preemption`]): CONFIG_PREEMPT_DYNAMIC, CONFIG_ARCH_HAS_PREEMPT_LAZY and the
//! 7.0 restriction to `full` and `lazy` (commit 7dadeaa6e851); the rseq time-slice extension from
//! CONFIG_RSEQ_SLICE_EXTENSION (Linux 7.0+).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hostfacts::kernel::{decide_preemption, Inputs};
use results::host::kernel::PreemptModel;

use crate::arch::{self, GuestArch};
use crate::VmError;

/// The default kernel cache directory.
pub const DEFAULT_CACHE: &str = "/var/cache/preemptlab/kernels";

/// The kernel cache in use: `$PREEMPTLAB_KERNEL_CACHE` or [`DEFAULT_CACHE`].
pub fn cache_dir() -> PathBuf {
    std::env::var_os("PREEMPTLAB_KERNEL_CACHE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CACHE))
}

/// A kernel that can be booted.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    /// The name `--kernel` accepts: the release, or the cache directory's name for a kernel build.
    pub name: String,
    /// The image QEMU boots.
    pub image: PathBuf,
    /// Its config file, when one was found.
    pub config: Option<PathBuf>,
}

/// What a kernel offers, read from its config.
#[derive(Debug, Clone, PartialEq)]
pub struct Capabilities {
    /// The preemption models it can run (empty: unknown, no config).
    pub offered: Vec<PreemptModel>,
    /// The model it boots without `preempt=` (None: unknown).
    pub default_model: Option<PreemptModel>,
    /// CONFIG_RSEQ_SLICE_EXTENSION=y (false also for kernels older than the option).
    pub rseq_slice_extension: Option<bool>,
}

/// Where to look: system module trees, `/boot`, and the kernel cache.
#[derive(Debug, Clone)]
pub struct SearchPaths {
    /// Module trees (`/lib/modules`, `/usr/lib/modules`).
    pub module_trees: Vec<PathBuf>,
    /// Where `vmlinuz-RELEASE` and `config-RELEASE` of installed kernels live.
    pub boot: PathBuf,
    /// The kernel cache.
    pub cache: PathBuf,
}

impl SearchPaths {
    /// This host's places.
    pub fn live() -> SearchPaths {
        SearchPaths {
            module_trees: vec!["/lib/modules".into(), "/usr/lib/modules".into()],
            boot: "/boot".into(),
            cache: cache_dir(),
        }
    }

    /// Every directory searched, for error messages.
    pub fn describe(&self) -> String {
        let mut v: Vec<String> = self
            .module_trees
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        v.push(self.cache.display().to_string());
        v.join(", ")
    }
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn first_file(candidates: &[PathBuf]) -> Option<PathBuf> {
    candidates.iter().find(|p| p.is_file()).cloned()
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A release installed in the module tree `tree`, with `/boot` beside it.
fn installed(tree: &Path, release: &str, boot: &Path) -> Option<Kernel> {
    let moddir = tree.join(release);
    let image = first_file(&[
        boot.join(format!("vmlinuz-{release}")),
        moddir.join("vmlinuz"),
    ])?;
    let config = first_file(&[
        boot.join(format!("config-{release}")),
        moddir.join("config"),
    ]);
    Some(Kernel {
        name: release.to_string(),
        image,
        config,
    })
}

/// One cache directory: a package tree (possibly several releases) or a kernel build.
fn cached(dir: &Path) -> Vec<Kernel> {
    let mut found = Vec::new();
    for tree in [dir.join("usr/lib/modules"), dir.join("lib/modules")] {
        for moddir in subdirs(&tree) {
            if let Some(k) = installed(&tree, &file_name(&moddir), &dir.join("boot")) {
                if !found.iter().any(|f: &Kernel| f.name == k.name) {
                    found.push(k);
                }
            }
        }
    }
    if found.is_empty() {
        if let Some(image) = first_file(&[
            dir.join("vmlinuz"),
            dir.join("bzImage"),
            dir.join("arch/x86/boot/bzImage"),
            dir.join("Image"),
            dir.join("arch/arm64/boot/Image"),
        ]) {
            found.push(Kernel {
                name: file_name(dir),
                image,
                config: first_file(&[dir.join("config"), dir.join(".config")]),
            });
        }
    }
    found
}

/// Every bootable kernel found, installed ones first, then the cache; a release seen twice is listed once.
pub fn discover(paths: &SearchPaths) -> Vec<Kernel> {
    let mut all: Vec<Kernel> = Vec::new();
    let push = |k: Kernel, all: &mut Vec<Kernel>| {
        if !all.iter().any(|f| f.name == k.name) {
            all.push(k);
        }
    };
    for tree in &paths.module_trees {
        for moddir in subdirs(tree) {
            if let Some(k) = installed(tree, &file_name(&moddir), &paths.boot) {
                push(k, &mut all);
            }
        }
    }
    for dir in subdirs(&paths.cache) {
        if file_name(&dir).starts_with('.') {
            continue; // work in progress of scripts/kernels or a build
        }
        for k in cached(&dir) {
            push(k, &mut all);
        }
    }
    all
}

/// Picks the kernel `spec` names among `found`: an exact name, a path to an image, or a short version
/// (`6.18` matches `6.18.15+deb13-amd64`, never `6.180`; `7.2` prefers point releases `7.2.N...` over other
/// names that merely start with it, such as a build called `7.2-rseq`).
pub fn resolve(spec: &str, found: &[Kernel], searched: &str) -> Result<Kernel, VmError> {
    let names = || found.iter().map(|k| k.name.clone()).collect::<Vec<_>>();
    if let Some(k) = found.iter().find(|k| k.name == spec) {
        return Ok(k.clone());
    }
    let path = Path::new(spec);
    if spec.contains('/') {
        if let Some(k) = found.iter().find(|k| k.image == path) {
            return Ok(k.clone());
        }
        if path.is_file() {
            return Ok(Kernel {
                name: spec.to_string(),
                image: path.to_path_buf(),
                config: config_beside(path),
            });
        }
        return Err(VmError::KernelNotFound {
            spec: spec.into(),
            candidates: names(),
            searched: searched.into(),
        });
    }
    let starts = |seps: &[char]| -> Vec<&Kernel> {
        found
            .iter()
            .filter(|k| {
                k.name
                    .strip_prefix(spec)
                    .and_then(|rest| rest.chars().next())
                    .is_some_and(|c| seps.contains(&c))
            })
            .collect()
    };
    let mut matches = starts(&['.']);
    if matches.is_empty() {
        matches = starts(&['-', '+', '_']);
    }
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(VmError::KernelNotFound {
            spec: spec.into(),
            candidates: names(),
            searched: searched.into(),
        }),
        many => Err(VmError::KernelAmbiguous {
            spec: spec.into(),
            candidates: many.iter().map(|k| k.name.clone()).collect(),
        }),
    }
}

/// What the first bytes of a kernel image say it is, or why it is none QEMU boots (pure). The formats, from
/// the kernel's own documentation: an x86 bzImage has the boot sector's 0xAA55 at 0x1FE and the setup
/// header's magic "HdrS" at 0x202 (Documentation/arch/x86/boot.rst); an arm64 Image has "ARM\x64" at 0x38
/// (Documentation/arch/arm64/booting.rst), its EFI zboot form "MZ" with "zimg" at 4
/// (drivers/firmware/efi/libstub/zboot-header.S); QEMU also loads an ELF vmlinux and a gzipped Image.
pub fn image_format(head: &[u8]) -> Result<&'static str, String> {
    let at = |off: usize, magic: &[u8]| head.get(off..off + magic.len()) == Some(magic);
    if at(0x1FE, &[0x55, 0xAA]) && at(0x202, b"HdrS") {
        return Ok("x86 bzImage");
    }
    if at(0x38, b"ARM\x64") {
        return Ok("arm64 Image");
    }
    if at(0, b"MZ") && at(4, b"zimg") {
        return Ok("arm64 EFI zboot image");
    }
    if at(0, b"\x7fELF") {
        return Ok("ELF vmlinux");
    }
    if at(0, &[0x1f, 0x8b]) {
        return Ok("gzip-compressed image");
    }
    let text = |h: &[u8]| {
        h.iter()
            .take(512)
            .all(|&b| b == b'\n' || b == b'\t' || (0x20..0x7f).contains(&b))
    };
    Err(match head {
        [] => "an empty file".into(),
        h if text(h) => "text, no bzImage header (HdrS at 0x202) nor arm64 Image magic".into(),
        h if h.len() < 0x206 => format!("{} bytes, shorter than any kernel's header", h.len()),
        _ => "no bzImage header (HdrS at 0x202), arm64 Image magic (ARM\\x64 at 0x38), ELF or gzip"
            .into(),
    })
}

/// Checks that `k`'s image is one QEMU boots ([`image_format`]), before anything boots: a text file given
/// as `--kernel` booted and failed 7-14 s later with QEMU's reason buried in its console (issue 46 item 6).
pub fn check_image(k: &Kernel) -> Result<(), crate::VmError> {
    use std::io::Read;
    let mut head = Vec::with_capacity(4096);
    std::fs::File::open(&k.image)
        .and_then(|f| f.take(4096).read_to_end(&mut head))
        .map_err(|e| {
            crate::VmError::io(format!("reading the kernel image {}", k.image.display()), e)
        })?;
    image_format(&head)
        .map(drop)
        .map_err(|why| crate::VmError::NotAKernel {
            image: k.image.clone(),
            why,
        })
}

/// A config file next to a kernel image given by path (a build tree or a cache directory).
fn config_beside(image: &Path) -> Option<PathBuf> {
    let mut dir = image.parent();
    // arch/x86/boot/bzImage -> the build tree's root
    for _ in 0..4 {
        let d = dir?;
        if let Some(c) = first_file(&[d.join(".config"), d.join("config")]) {
            return Some(c);
        }
        dir = d.parent();
    }
    None
}

/// What a kernel with this config offers (pure: `release` is the kernel's release, `config` its text).
pub fn capabilities(release: &str, config: &str) -> Capabilities {
    let cfg: BTreeMap<String, String> = hostfacts::parse::kernel_config(config);
    let p = decide_preemption(&Inputs {
        release: Some(release),
        version: None,
        arch: Some(arch::from_config(&cfg).map_or("x86_64", GuestArch::uname)),
        config: Some(&cfg),
        config_source: Some("the kernel's config file"),
        debugfs: Err("not booted".into()),
        boot_log: Err("not booted".into()),
        cmdline: None,
    });
    // Absent from the config: not set, or a kernel older than the option (7.0).
    let rseq = Some(cfg.get("CONFIG_RSEQ_SLICE_EXTENSION").map(String::as_str) == Some("y"));
    Capabilities {
        offered: p.offered,
        default_model: (p.model != PreemptModel::Unknown).then_some(p.model),
        rseq_slice_extension: rseq,
    }
}

/// Why a kernel's config could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// None was found next to the kernel.
    #[error("no config file found for {0}")]
    Missing(String),
    /// It could not be read.
    #[error("{}: {err}", path.display())]
    Read {
        /// The config file.
        path: PathBuf,
        /// Why.
        err: std::io::Error,
    },
}

/// Reads a kernel's config and says what it offers; `Capabilities` with nothing known when there is no
/// config (the reason is the `Err`).
pub fn read_capabilities(k: &Kernel) -> Result<Capabilities, ConfigError> {
    let path = k
        .config
        .as_ref()
        .ok_or_else(|| ConfigError::Missing(k.name.clone()))?;
    let text = std::fs::read_to_string(path).map_err(|err| ConfigError::Read {
        path: path.clone(),
        err,
    })?;
    Ok(capabilities(&k.name, &text))
}

/// A kernel's architecture ([`arch::of_kernel`]: its config, else its image's header).
pub fn arch_of(k: &Kernel) -> Option<GuestArch> {
    arch::of_kernel(k.config.as_deref(), &k.image)
}

/// The kernels of `found` that are of `want` (an unknown architecture counts as `default`, the host's).
pub fn of_arch(found: Vec<Kernel>, want: GuestArch, default: GuestArch) -> Vec<Kernel> {
    found
        .into_iter()
        .filter(|k| arch_of(k).unwrap_or(default) == want)
        .collect()
}

/// The list of bootable kernels (of `only` that architecture when given), one [`list_line`] each; none found
/// is an error naming the places searched.
pub fn list(only: Option<GuestArch>) -> Result<Vec<String>, VmError> {
    let paths = SearchPaths::live();
    let host = GuestArch::host().unwrap_or(GuestArch::X86_64);
    let mut found = discover(&paths);
    if let Some(a) = only {
        found = of_arch(found, a, host);
    }
    if found.is_empty() {
        return Err(VmError::NoKernels {
            searched: paths.describe(),
            arch: only,
        });
    }
    Ok(found
        .iter()
        .map(|k| list_line(k, arch_of(k).unwrap_or(host), &read_capabilities(k)))
        .collect())
}

/// One kernel's line of the list: the name, its architecture, the models offered (the default marked with
/// `*`), the slice extension.
pub fn list_line(k: &Kernel, arch: GuestArch, caps: &Result<Capabilities, ConfigError>) -> String {
    match caps {
        Ok(c) => {
            let models = if c.offered.is_empty() {
                "models unknown".to_string()
            } else {
                c.offered
                    .iter()
                    .map(|m| {
                        if Some(*m) == c.default_model {
                            format!("{m}*")
                        } else {
                            m.to_string()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let rseq = match c.rseq_slice_extension {
                Some(true) => "rseq-slice-ext: yes",
                Some(false) => "rseq-slice-ext: no",
                None => "rseq-slice-ext: unknown",
            };
            format!(
                "{}  {arch}  {models}  {rseq}  {}",
                k.name,
                k.image.display()
            )
        }
        Err(why) => format!(
            "{}  {arch}  models unknown  rseq-slice-ext: unknown ({why})  {}",
            k.name,
            k.image.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(name: &str) -> Kernel {
        Kernel {
            name: name.into(),
            image: PathBuf::from(format!("/k/{name}/vmlinuz")),
            config: None,
        }
    }

    /// Regression (issue 46 item 6): `vm --kernel <a text file>` booted and failed 7-14 s later. The
    /// header of every image this host can boot is recognised; text, an empty file and a short one are not.
    #[test]
    fn vm_kernel_a_text_file_boots_and_fails_regression() {
        for k in discover(&SearchPaths::live()) {
            let head = std::fs::read(&k.image).unwrap();
            assert!(
                image_format(&head).is_ok(),
                "{}: {:?}",
                k.image.display(),
                image_format(&head)
            );
        }
        assert!(image_format(b"").unwrap_err().contains("empty"));
        assert!(image_format(&[0x4d, 0x5a, 0])
            .unwrap_err()
            .contains("shorter"));
        assert!(image_format(b"not json at all\n")
            .unwrap_err()
            .starts_with("text"));
        let text = "CONFIG_PREEMPT_DYNAMIC=y\n".repeat(100);
        assert!(image_format(text.as_bytes())
            .unwrap_err()
            .starts_with("text"));
        assert!(image_format(&[0u8; 4096]).is_err());
    }

    #[test]
    fn short_versions_match_point_releases_first() {
        let found = [
            k("6.18.15+deb13-amd64"),
            k("7.2.13+deb14-amd64"),
            k("7.2-rseq"),
        ];
        assert_eq!(
            resolve("6.18", &found, "").unwrap().name,
            "6.18.15+deb13-amd64"
        );
        assert_eq!(
            resolve("7.2", &found, "").unwrap().name,
            "7.2.13+deb14-amd64"
        );
        assert_eq!(resolve("7.2-rseq", &found, "").unwrap().name, "7.2-rseq");
        assert_eq!(
            resolve("/k/7.2-rseq/vmlinuz", &found, "").unwrap().name,
            "7.2-rseq"
        );
    }

    #[test]
    fn missing_and_ambiguous_name_the_candidates() {
        let found = [k("6.18.15+deb13-amd64"), k("6.18.16+deb13-amd64")];
        let e = resolve("6.18", &found, "").unwrap_err().to_string();
        assert!(
            e.contains("6.18.15+deb13-amd64") && e.contains("6.18.16+deb13-amd64"),
            "{e}"
        );
        let e = resolve("6.1", &found, "/lib/modules")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("6.18.15+deb13-amd64") && e.contains("scripts/kernels fetch"),
            "{e}"
        );
        assert!(resolve("6.180", &found, "").is_err());
    }

    const CFG_618: &str = "CONFIG_PREEMPT_BUILD=y\nCONFIG_ARCH_HAS_PREEMPT_LAZY=y\n# CONFIG_PREEMPT_NONE is not set\n\
        # CONFIG_PREEMPT is not set\nCONFIG_PREEMPT_LAZY=y\nCONFIG_PREEMPT_DYNAMIC=y\nCONFIG_HZ=250\n";
    const CFG_72: &str =
        "CONFIG_ARCH_HAS_PREEMPT_LAZY=y\n# CONFIG_PREEMPT is not set\nCONFIG_PREEMPT_LAZY=y\n\
        CONFIG_PREEMPT_DYNAMIC=y\n# CONFIG_RSEQ_SLICE_EXTENSION is not set\n";

    #[test]
    fn debian_618_offers_four_models_and_boots_lazy() {
        let c = capabilities("6.18.15+deb13-amd64", CFG_618);
        use PreemptModel::*;
        assert_eq!(c.offered, vec![None, Voluntary, Full, Lazy]);
        assert_eq!(c.default_model, Some(Lazy));
        assert_eq!(c.rseq_slice_extension, Some(false));
    }

    #[test]
    fn debian_72_offers_full_and_lazy_without_the_slice_extension() {
        let c = capabilities("7.2.13+deb14-amd64", CFG_72);
        assert_eq!(c.offered, vec![PreemptModel::Full, PreemptModel::Lazy]);
        assert_eq!(c.rseq_slice_extension, Some(false));
        let c = capabilities(
            "7.2.13",
            &format!("{CFG_72}CONFIG_RSEQ_SLICE_EXTENSION=y\n"),
        );
        assert_eq!(c.rseq_slice_extension, Some(true));
        let line = list_line(
            &k("7.2.13+deb14-amd64"),
            GuestArch::X86_64,
            &Ok(capabilities("7.2.13", CFG_72)),
        );
        assert!(
            line.starts_with("7.2.13+deb14-amd64  x86_64  full lazy*  rseq-slice-ext: no"),
            "{line}"
        );
    }

    /// Debian's arm64 7.2 (and 6.18): lazy built in, no PREEMPT_DYNAMIC (arm64 selects only
    /// HAVE_PREEMPT_DYNAMIC_KEY, and PREEMPT_DYNAMIC defaults to y only with HAVE_PREEMPT_DYNAMIC_CALL):
    /// one model, no switching, `preempt=` ignored.
    #[test]
    fn debian_arm64_72_offers_lazy_alone() {
        let cfg = "CONFIG_ARM64=y\nCONFIG_ARCH_HAS_PREEMPT_LAZY=y\n# CONFIG_PREEMPT is not set\n\
            CONFIG_PREEMPT_LAZY=y\n# CONFIG_PREEMPT_DYNAMIC is not set\n# CONFIG_RSEQ_SLICE_EXTENSION is not set\n";
        let c = capabilities("7.2.13+deb14-arm64", cfg);
        assert_eq!(c.offered, vec![PreemptModel::Lazy]);
        assert_eq!(c.default_model, Some(PreemptModel::Lazy));
        let line = list_line(&k("7.2.13+deb14-arm64"), GuestArch::Arm64, &Ok(c));
        assert!(
            line.starts_with("7.2.13+deb14-arm64  arm64  lazy*  rseq-slice-ext: no"),
            "{line}"
        );
    }

    #[test]
    fn discovers_package_trees_and_builds_in_the_cache() {
        let root = tempfile::tempdir().unwrap();
        let cache = root.path().join("cache");
        let pkg = cache.join("7.2.13+deb14-amd64");
        let r = "7.2.13+deb14-amd64";
        std::fs::create_dir_all(pkg.join(format!("usr/lib/modules/{r}"))).unwrap();
        std::fs::write(pkg.join(format!("usr/lib/modules/{r}/vmlinuz")), b"x").unwrap();
        std::fs::create_dir_all(pkg.join("boot")).unwrap();
        std::fs::write(pkg.join(format!("boot/config-{r}")), CFG_72).unwrap();
        let build = cache.join("7.2-rseq");
        std::fs::create_dir_all(&build).unwrap();
        std::fs::write(build.join("bzImage"), b"x").unwrap();
        std::fs::write(build.join(".config"), CFG_72).unwrap();
        let arm = cache.join("6.18-arm64-dynamic");
        std::fs::create_dir_all(&arm).unwrap();
        std::fs::write(arm.join("Image"), b"x").unwrap();
        std::fs::write(arm.join("config"), "CONFIG_ARM64=y\n").unwrap();
        std::fs::create_dir_all(cache.join(".build-7.2-rseq")).unwrap();
        std::fs::write(cache.join(".build-7.2-rseq/bzImage"), b"x").unwrap();
        let paths = SearchPaths {
            module_trees: vec![root.path().join("lib/modules")],
            boot: root.path().join("boot"),
            cache,
        };
        let found = discover(&paths);
        let names: Vec<&str> = found.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, vec!["6.18-arm64-dynamic", "7.2-rseq", r]);
        assert_eq!(arch_of(&found[0]), Some(GuestArch::Arm64));
        assert!(found[2]
            .config
            .as_ref()
            .unwrap()
            .ends_with(format!("config-{r}")));
        assert!(found[1].config.as_ref().unwrap().ends_with(".config"));
    }
}
