//! `preemptlab vm`: boots another kernel under QEMU through virtme-ng and runs a preemptlab command in it.
//!
//! Most hosts cannot switch kernels or preemption models at will; a VM can. virtme-ng (`vng`, the kernel
//! community's tool, <https://github.com/arighi/virtme-ng>) boots a kernel image with the host's root
//! filesystem shared read-only (writes go to tmpfs overlays) and a writable host directory (`--rwdir`): the
//! guest runs this same binary from the host's disk, writes its output and result into that directory, and the
//! host reads them back and adds a [`VmBlock`] saying how the guest was run.
//!
//! - [`kernels`]: which kernels can be booted and what each offers (models, rseq slice extension);
//! - [`accel`]: KVM or TCG, with the reason;
//! - [`run`]: the virtme-ng invocation, the guest script, timing, and cleanup (virtme-ng and QEMU run in
//!   their own process group, killed on SIGINT/SIGTERM/SIGHUP or error; the temp dir is removed);
//! - [`record`]: the `vm` block of the result (pure data; all that is left without the default `runner`
//!   feature, for the `results` schema crate).

#[cfg(feature = "runner")]
pub mod accel;
#[cfg(feature = "runner")]
pub mod kernels;
pub mod record;
#[cfg(feature = "runner")]
pub mod run;

#[cfg(feature = "runner")]
pub use accel::{Accel, AccelRequest};
#[cfg(feature = "runner")]
pub use kernels::{Capabilities, Kernel};
pub use record::VmBlock;
#[cfg(feature = "runner")]
pub use run::{VmOptions, VmOutcome};

/// What can go wrong; every message names the fix.
#[cfg(feature = "runner")]
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// No kernel at all.
    #[error("no bootable kernel found in {searched}; run scripts/kernels fetch, or give --kernel PATH_TO_VMLINUZ")]
    NoKernels {
        /// Directories searched.
        searched: String,
    },
    /// `--kernel` matched nothing.
    #[error("--kernel {spec}: no such kernel (found: {}; searched {searched}); run scripts/kernels fetch or give a vmlinuz path", list(.candidates))]
    KernelNotFound {
        /// What was asked.
        spec: String,
        /// What exists.
        candidates: Vec<String>,
        /// Where we looked.
        searched: String,
    },
    /// `--kernel` matched several.
    #[error("--kernel {spec} is ambiguous: it matches {}; give the full name", .candidates.join(", "))]
    KernelAmbiguous {
        /// What was asked.
        spec: String,
        /// What matched.
        candidates: Vec<String>,
    },
    /// `--preempt` names a model the kernel does not offer.
    #[error("--preempt {model}: kernel {kernel} offers only {}; pick one of those or another --kernel (preemptlab vm --list)", .offered.join(", "))]
    ModelNotOffered {
        /// What was asked.
        model: String,
        /// The kernel.
        kernel: String,
        /// What it offers.
        offered: Vec<String>,
    },
    /// More vCPUs than host CPUs.
    #[error("--cpus {asked}: more than this host's {host} CPUs (an oversubscribed guest measures the hypervisor's lock-holder preemption, not the kernel's); use --cpus {host} or fewer")]
    TooManyCpus {
        /// Asked for.
        asked: u32,
        /// Host CPUs.
        host: u32,
    },
    /// Bad option value.
    #[error("{0}")]
    Usage(String),
    /// `--accel kvm` on a host where KVM cannot boot a standard kernel.
    #[error("--accel kvm: {0}; use --accel tcg (or auto)")]
    KvmUnusable(String),
    /// A tool is missing.
    #[error("{tool} not found; {fix}")]
    ToolMissing {
        /// The tool.
        tool: String,
        /// How to get it.
        fix: String,
    },
    /// An I/O step failed.
    #[error("{what}: {source}")]
    Io {
        /// What we were doing, on which path.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The guest never ran the command or never reported its exit status.
    #[error("the guest did not run the command ({why}); virtme-ng's last output:\n{log_tail}")]
    GuestFailed {
        /// What was missing.
        why: String,
        /// The end of virtme-ng's output.
        log_tail: String,
    },
    /// SIGINT, SIGTERM or SIGHUP.
    #[error("interrupted: the VM was stopped and nothing is left behind")]
    Interrupted,
}

#[cfg(feature = "runner")]
fn list(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
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
}
