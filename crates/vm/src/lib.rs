//! `preemptlab vm`: boots another kernel under QEMU through virtme-ng and runs a preemptlab command in it.
//!
//! Most hosts cannot switch kernels or preemption models at will; a VM can. virtme-ng (`vng`, the kernel
//! community's tool, <https://github.com/arighi/virtme-ng>) boots a kernel image with the host's root
//! filesystem shared read-only (writes go to tmpfs overlays) and a writable host directory (`--rwdir`): the
//! guest runs this same binary from the host's disk, writes its output and result into that directory, and the
//! host reads them back and adds a [`VmBlock`] saying how the guest was run.
//!
//! An arm64 guest (`arch`, [`arch`]) cannot share the x86_64 host's root: it boots an arm64 root filesystem
//! made from Debian's packages (`scripts/arm64-root`) through virtme-ng's `--arch arm64 --root`, on
//! `qemu-system-aarch64 -M virt -cpu max` under TCG, and runs the cross-built arm64 binary
//! (`scripts/cross-arm64`), copied into a directory handed to the guest.
//!
//! - [`arch`]: the guest's architecture, a kernel's, the arm64 root and binary;
//! - [`kernels`]: which kernels can be booted and what each offers (models, rseq slice extension);
//! - [`accel`]: KVM or TCG, with the reason;
//! - [`guest`]: what the host hands the guest and reads back from its console (the guest script, the
//!   kernel parameters with the guest's own ID, virtme-ng's arguments, the command's `--out`, whether a
//!   boot panicked), pure;
//! - [`pgdirs`]: the PostgreSQL build directories a `bench pg --pg-bin` command needs shared into the guest;
//! - [`run`]: booting and waiting, timing, a boot that panicked before the command tried again, and
//!   cleanup (virtme-ng and QEMU run in their own process group, killed on a stop signal or error; the temp
//!   dir is removed);
//! - [`vcpus`]: the guest's vCPU threads' run and wait times on the host while the command ran;
//! - [`record`]: the `vm` block of the result (pure data; all that is left without the default `runner`
//!   feature, for the `results` schema crate);
//! - `cli` (feature `cli`): the options as a command line gives them (clap), turned into [`VmOptions`].

#[cfg(feature = "runner")]
pub mod accel;
#[cfg(feature = "runner")]
pub mod arch;
#[cfg(feature = "runner")]
mod boot;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "runner")]
pub mod guest;
#[cfg(feature = "runner")]
pub mod kernels;
#[cfg(feature = "runner")]
pub mod pgdirs;
#[cfg(feature = "runner")]
pub mod run;
#[cfg(feature = "runner")]
pub mod vcpus;

#[cfg(feature = "runner")]
use std::path::PathBuf;

#[cfg(feature = "runner")]
pub use accel::{Accel, AccelRequest};
#[cfg(feature = "runner")]
pub use arch::GuestArch;
#[cfg(feature = "runner")]
pub use kernels::{Capabilities, Kernel};
#[cfg(feature = "runner")]
pub use run::{VmOptions, VmOutcome};

/// What can go wrong; every message names the fix. Messages name the options of [`VmOptions`] (and the
/// `list` of kernels, the guest `command`) by field; [`VmError::render`] names them as the caller does.
#[cfg(feature = "runner")]
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// No kernel at all.
    #[error("{}", self.render(str::to_string))]
    NoKernels {
        /// Directories searched.
        searched: String,
        /// The architecture asked for, when only its kernels counted.
        arch: Option<arch::GuestArch>,
    },
    /// `arch` is no architecture a guest can have.
    #[error("{}", self.render(str::to_string))]
    UnknownArch(String),
    /// `kernel` names a kernel of another architecture than `arch`.
    #[error("{}", self.render(str::to_string))]
    KernelArch {
        /// The kernel.
        kernel: String,
        /// Its architecture.
        is: arch::GuestArch,
        /// The guest's.
        asked: arch::GuestArch,
    },
    /// The arm64 root filesystem is missing or unfinished.
    #[error("{}", self.render(str::to_string))]
    NoRoot {
        /// Where it was looked for.
        path: std::path::PathBuf,
    },
    /// No arm64 preemptlab to run in the guest.
    #[error("{}", self.render(str::to_string))]
    NoGuestExe {
        /// Where it was looked for.
        searched: Vec<String>,
    },
    /// `guest_exe` is not an aarch64 executable.
    #[error("{}", self.render(str::to_string))]
    NotAGuestExe {
        /// The file.
        path: std::path::PathBuf,
        /// The guest's architecture.
        arch: arch::GuestArch,
    },
    /// `accel` kvm for a guest of another architecture than the host's.
    #[error("{}", self.render(str::to_string))]
    KvmForeign(arch::GuestArch),
    /// `kernel` matched nothing.
    #[error("{}", self.render(str::to_string))]
    KernelNotFound {
        /// What was asked.
        spec: String,
        /// What exists.
        candidates: Vec<String>,
        /// Where we looked.
        searched: String,
    },
    /// `kernel` matched several.
    #[error("{}", self.render(str::to_string))]
    KernelAmbiguous {
        /// What was asked.
        spec: String,
        /// What matched.
        candidates: Vec<String>,
    },
    /// No `kernel` given, and more than one found.
    #[error("{}", self.render(str::to_string))]
    SeveralKernels {
        /// What was found.
        found: Vec<String>,
    },
    /// `preempt` (or the guest command's `switch_preempt`) names a model the kernel does not offer.
    #[error("{}", self.render(str::to_string))]
    ModelNotOffered {
        /// The option that asked (`preempt`, `switch_preempt`).
        option: &'static str,
        /// What was asked.
        model: String,
        /// The kernel.
        kernel: String,
        /// What it offers.
        offered: Vec<String>,
    },
    /// `preempt` is no model a kernel can boot with.
    #[error("{}", self.render(str::to_string))]
    NotAModel(String),
    /// `preempt` and a `preempt=` in `append` name different models.
    #[error("{}", self.render(str::to_string))]
    PreemptConflict {
        /// The model `preempt` names.
        preempt: String,
        /// The one `append` names.
        appended: String,
    },
    /// More vCPUs than host CPUs.
    #[error("{}", self.render(str::to_string))]
    TooManyCpus {
        /// Asked for.
        asked: u32,
        /// Host CPUs.
        host: u32,
    },
    /// No vCPUs.
    #[error("{}", self.render(str::to_string))]
    NoCpus,
    /// `memory` is not a size (why).
    #[error("{}", self.render(str::to_string))]
    Memory(String),
    /// Less memory than a guest boots with, MiB.
    #[error("{}", self.render(str::to_string))]
    TooLittleMemory(u64),
    /// More memory than the host has (QEMU would fail to allocate it after the boot began).
    #[error("{}", self.render(str::to_string))]
    TooMuchMemory {
        /// Asked for, MiB.
        asked_mib: u64,
        /// The host's RAM (`MemTotal`), MiB.
        host_mib: u64,
    },
    /// The kernel image is no image QEMU boots (a text file, a config, a truncated download).
    #[error("{}", self.render(str::to_string))]
    NotAKernel {
        /// The image.
        image: PathBuf,
        /// What its first bytes are.
        why: String,
    },
    /// `boot_timeout` is not a duration.
    #[error("{}", self.render(str::to_string))]
    BootTimeout(hostfacts::duration::DurationError),
    /// A zero `boot_timeout`.
    #[error("{}", self.render(str::to_string))]
    NoBootTimeout,
    /// No guest command.
    #[error("{}", self.render(str::to_string))]
    NoCommand,
    /// `vm` as the guest command.
    #[error("{}", self.render(str::to_string))]
    Nested,
    /// `accel` kvm on a host where KVM cannot boot a standard kernel.
    #[error("{}", self.render(str::to_string))]
    KvmUnusable(accel::KvmUnusable),
    /// A tool is missing.
    #[error("{}", self.render(str::to_string))]
    ToolMissing {
        /// The tool.
        tool: String,
        /// How to get it.
        fix: String,
    },
    /// An I/O step failed.
    #[error("{}", self.render(str::to_string))]
    Io {
        /// What we were doing, on which path.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The guest never ran the command or never reported its exit status.
    #[error("{}", self.render(str::to_string))]
    GuestFailed {
        /// What was missing.
        why: String,
        /// The end of virtme-ng's output.
        log_tail: String,
    },
    /// The guest did not start the command within `boot_timeout`.
    #[error("{}", self.render(str::to_string))]
    BootTimedOut {
        /// The timeout, seconds.
        secs: u64,
        /// The end of virtme-ng's output.
        log_tail: String,
    },
    /// The result file could not be written on the host.
    #[error("{}", self.render(str::to_string))]
    Output(#[from] osutil::output::OutputError),
    /// A stop signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT: [`osutil::stop`]).
    #[error("{}", self.render(str::to_string))]
    Interrupted,
}

/// MiB as a size (`100 TiB`, `23.5 GiB`).
#[cfg(feature = "runner")]
fn mib(m: u64) -> String {
    results::host::Bytes::from_kib(m.saturating_mul(1024)).to_string()
}

#[cfg(feature = "runner")]
fn list(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// How to fetch the kernels of an architecture.
#[cfg(feature = "runner")]
fn fetch_arch(a: arch::GuestArch) -> &'static str {
    match a {
        arch::GuestArch::X86_64 => "run scripts/kernels fetch",
        arch::GuestArch::Arm64 => "run scripts/kernels fetch --arch arm64",
    }
}

#[cfg(feature = "runner")]
impl VmError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> VmError {
        VmError::Io {
            what: what.into(),
            source,
        }
    }

    /// The message with every option named by `name` (the command line passes its flag spelling; `list`
    /// is where the kernels are listed, `command` where the guest command goes). Every variant is spelled
    /// out here (its `Display` is this with the field names): no arm falls back to `Display`, which would
    /// call this again.
    pub fn render(&self, name: impl Fn(&str) -> String) -> String {
        let fetch = "run scripts/kernels fetch";
        match self {
            VmError::NoKernels {
                searched,
                arch: None,
            } => format!(
                "no bootable kernel found in {searched}; {fetch}, or give {} PATH_TO_VMLINUZ",
                name("kernel")
            ),
            VmError::NoKernels {
                searched,
                arch: Some(a),
            } => format!(
                "no {a} kernel found in {searched}; {}, or give {} PATH_TO_VMLINUZ",
                fetch_arch(*a),
                name("kernel")
            ),
            VmError::UnknownArch(a) => format!(
                "{} {a}: not an architecture a guest can have; use x86_64 or arm64",
                name("arch")
            ),
            VmError::KernelArch { kernel, is, asked } => format!(
                "{} {kernel} is an {is} kernel, not {asked}; give {} {is}, or an {asked} kernel ({} shows them)",
                name("kernel"),
                name("arch"),
                name("list")
            ),
            VmError::NoRoot { path } => format!(
                "no arm64 root filesystem at {}; run scripts/arm64-root (or give {} DIR)",
                path.display(),
                name("root")
            ),
            VmError::NoGuestExe { searched } => format!(
                "no arm64 preemptlab found (looked at {}); run scripts/cross-arm64, or give {} PATH",
                searched.join(", "),
                name("guest_exe")
            ),
            VmError::NotAGuestExe { path, arch } => format!(
                "{} {}: not an {arch} executable; give the one scripts/cross-arm64 builds",
                name("guest_exe"),
                path.display()
            ),
            VmError::KvmForeign(a) => {
                let accel = name("accel");
                format!("{accel} kvm: this host cannot run an {a} guest under KVM; use {accel} tcg (or auto)")
            }
            VmError::KernelNotFound {
                spec,
                candidates,
                searched,
            } => format!(
                "{} {spec}: no such kernel (found: {}; searched {searched}); {fetch} or give a vmlinuz path",
                name("kernel"),
                list(candidates)
            ),
            VmError::KernelAmbiguous { spec, candidates } => format!(
                "{} {spec} is ambiguous: it matches {}; give the full name",
                name("kernel"),
                candidates.join(", ")
            ),
            VmError::SeveralKernels { found } => format!(
                "several kernels found ({}); choose one with {} ({} shows them)",
                found.join(", "),
                name("kernel"),
                name("list")
            ),
            VmError::ModelNotOffered {
                option,
                model,
                kernel,
                offered,
            } => format!(
                "{} {model}: kernel {kernel} offers only {}; pick one of those or another {} ({} shows them)",
                name(option),
                offered.join(", "),
                name("kernel"),
                name("list")
            ),
            VmError::NotAModel(m) => format!(
                "{} {m}: not a model (use none, voluntary, full or lazy)",
                name("preempt")
            ),
            VmError::PreemptConflict { preempt, appended } => format!(
                "{} {preempt} and preempt={appended} in {}: two different models; give one of them",
                name("preempt"),
                name("append")
            ),
            VmError::TooManyCpus { asked, host } => {
                let cpus = name("cpus");
                format!("{cpus} {asked}: more than this host's {host} CPUs (an oversubscribed guest measures the hypervisor's lock-holder preemption, not the kernel's); use {cpus} {host} or fewer")
            }
            VmError::NoCpus => format!("{} 0: give at least 1", name("cpus")),
            VmError::Memory(why) => format!("{}: {why} (e.g. 512M, 2G)", name("memory")),
            VmError::TooLittleMemory(mib) => format!(
                "{} {mib}M: too small to boot; give at least 256M",
                name("memory")
            ),
            VmError::TooMuchMemory { asked_mib, host_mib } => format!(
                "{} {}: more than this host's {} of RAM (MemTotal in /proc/meminfo): QEMU cannot allocate it; give at most {}M",
                name("memory"),
                mib(*asked_mib),
                mib(*host_mib),
                host_mib
            ),
            VmError::NotAKernel { image, why } => format!(
                "{} {}: not a kernel image ({why}); give a bootable image: a bzImage or vmlinuz (arch/x86/boot/bzImage in a build tree), an arm64 Image, or a kernel {} shows",
                name("kernel"),
                image.display(),
                name("list")
            ),
            VmError::BootTimeout(e) => format!("{}: {e}", name("boot_timeout")),
            VmError::NoBootTimeout => format!(
                "{} 0: give a positive duration, e.g. 10m",
                name("boot_timeout")
            ),
            VmError::NoCommand => format!(
                "give the preemptlab command to run in the guest ({})",
                name("command")
            ),
            VmError::Nested => format!(
                "the guest cannot run vm itself; give another command ({})",
                name("command")
            ),
            VmError::KvmUnusable(why) => {
                let accel = name("accel");
                format!("{accel} kvm: {why}; use {accel} tcg (or auto)")
            }
            VmError::BootTimedOut { secs, log_tail } => format!(
                "the guest did not run the command (it did not reach the command within {secs} s ({}); a loaded host slows TCG guests); virtme-ng's last output:\n{log_tail}",
                name("boot_timeout")
            ),
            VmError::ToolMissing { tool, fix } => format!("{tool} not found; {fix}"),
            VmError::Io { what, source } => format!("{what}: {source}"),
            VmError::GuestFailed { why, log_tail } => format!(
                "the guest did not run the command ({why}); virtme-ng's last output:\n{log_tail}"
            ),
            VmError::Output(e) => e.to_string(),
            VmError::Interrupted => {
                "interrupted: the VM was stopped and nothing is left behind".into()
            }
        }
    }
}
