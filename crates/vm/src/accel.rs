//! The accelerator: KVM where it can boot a standard kernel, QEMU's software emulation (TCG) otherwise.
//!
//! `/dev/kvm` existing is not enough. Some cloud VMs expose a PVM hypervisor (the `kvm_pvm` module: KVM for
//! guests without hardware virtualization) on which a standard kernel dies in its decompressor ("KVM internal
//! error. Suberror: 1"). The probe is cheap and touches nothing: open `/dev/kvm`, ask `KVM_GET_API_VERSION`
//! (12 since Linux 2.6.22, `Documentation/virt/kvm/api.rst`), and require hardware virtualization (the `vmx`
//! or `svm` CPU flag in `/proc/cpuinfo`) and no `kvm_pvm` module loaded.

use std::os::unix::io::AsRawFd;

use serde::{Deserialize, Serialize};

/// The accelerator asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccelRequest {
    /// KVM when usable, else TCG.
    Auto,
    /// KVM or an error.
    Kvm,
    /// Software emulation.
    Tcg,
}

/// The accelerator used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// Hardware virtualization through /dev/kvm.
    Kvm,
    /// QEMU's Tiny Code Generator (software emulation).
    Tcg,
}

impl Accel {
    /// `kvm` or `tcg`.
    pub fn as_str(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// What the probe of this host found (pure input to [`choose`]).
#[derive(Debug, Clone, PartialEq)]
pub struct KvmProbe {
    /// `Ok(api version)` from `KVM_GET_API_VERSION`, or why /dev/kvm could not be asked.
    pub api_version: Result<i32, String>,
    /// The CPU advertises vmx or svm.
    pub hardware_virt: bool,
    /// The `kvm_pvm` module is loaded.
    pub pvm: bool,
}

/// Probes this host.
pub fn probe() -> KvmProbe {
    let api_version = kvm_api_version();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    KvmProbe {
        api_version,
        hardware_virt: cpu_has_hardware_virt(&cpuinfo),
        pvm: std::path::Path::new("/sys/module/kvm_pvm").exists(),
    }
}

fn kvm_api_version() -> Result<i32, String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .map_err(|e| format!("/dev/kvm: {e}"))?;
    // _IO(KVMIO = 0xAE, 0x00)
    const KVM_GET_API_VERSION: libc::c_ulong = 0xAE00;
    // SAFETY: f is an open /dev/kvm descriptor for the whole call; KVM_GET_API_VERSION takes no argument
    // and writes no memory.
    let v = unsafe { libc::ioctl(f.as_raw_fd(), KVM_GET_API_VERSION as _, 0) };
    if v < 0 {
        return Err(format!(
            "/dev/kvm: KVM_GET_API_VERSION: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(v)
}

/// True when a `flags` line of /proc/cpuinfo names vmx (Intel VT-x) or svm (AMD-V).
pub fn cpu_has_hardware_virt(cpuinfo: &str) -> bool {
    cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|w| w == "vmx" || w == "svm"))
}

/// Why KVM cannot boot a standard kernel here.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KvmUnusable {
    /// /dev/kvm could not be asked (why).
    #[error("{0}")]
    NoApi(String),
    /// Another API version than 12.
    #[error("/dev/kvm answers API version {0}, not 12")]
    Version(i32),
    /// A PVM hypervisor.
    #[error("/dev/kvm is a PVM hypervisor (kvm_pvm module), which cannot boot a standard kernel")]
    Pvm,
    /// No hardware virtualization.
    #[error("/dev/kvm exists but the CPU has no hardware virtualization (no vmx/svm flag): not a standard KVM")]
    NoHardwareVirt,
}

/// Why KVM cannot boot a standard kernel here, or None when it can.
pub fn kvm_unusable(p: &KvmProbe) -> Option<KvmUnusable> {
    match &p.api_version {
        Err(e) => Some(KvmUnusable::NoApi(e.clone())),
        Ok(v) if *v != 12 => Some(KvmUnusable::Version(*v)),
        Ok(_) if p.pvm => Some(KvmUnusable::Pvm),
        Ok(_) if !p.hardware_virt => Some(KvmUnusable::NoHardwareVirt),
        Ok(_) => None,
    }
}

/// Chooses the accelerator and says why; `Err` when `kvm` was asked for and cannot work.
pub fn choose(req: AccelRequest, p: &KvmProbe) -> Result<(Accel, String), KvmUnusable> {
    match (req, kvm_unusable(p)) {
        (AccelRequest::Tcg, _) => Ok((
            Accel::Tcg,
            "TCG as asked: QEMU software emulation, far slower than bare metal".into(),
        )),
        (AccelRequest::Kvm, None) | (AccelRequest::Auto, None) => Ok((
            Accel::Kvm,
            "/dev/kvm usable (API 12, hardware virtualization)".into(),
        )),
        (AccelRequest::Kvm, Some(why)) => Err(why),
        (AccelRequest::Auto, Some(why)) => Ok((
            Accel::Tcg,
            format!(
                "{why}: fell back to QEMU software emulation (TCG), far slower than bare metal"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(api: Result<i32, String>, hw: bool, pvm: bool) -> KvmProbe {
        KvmProbe {
            api_version: api,
            hardware_virt: hw,
            pvm,
        }
    }

    #[test]
    fn pvm_falls_back_to_tcg_and_says_why() {
        let (a, why) = choose(AccelRequest::Auto, &p(Ok(12), false, true)).unwrap();
        assert_eq!(a, Accel::Tcg);
        assert!(why.contains("PVM"), "{why}");
        assert!(choose(AccelRequest::Kvm, &p(Ok(12), false, true)).is_err());
    }

    #[test]
    fn real_kvm_is_used() {
        let (a, _) = choose(AccelRequest::Auto, &p(Ok(12), true, false)).unwrap();
        assert_eq!(a, Accel::Kvm);
        let (a, _) = choose(AccelRequest::Tcg, &p(Ok(12), true, false)).unwrap();
        assert_eq!(a, Accel::Tcg);
    }

    #[test]
    fn missing_dev_kvm() {
        let (a, why) = choose(
            AccelRequest::Auto,
            &p(Err("/dev/kvm: No such file".into()), true, false),
        )
        .unwrap();
        assert_eq!(a, Accel::Tcg);
        assert!(why.starts_with("/dev/kvm: No such file"), "{why}");
    }

    #[test]
    fn cpu_flags() {
        assert!(cpu_has_hardware_virt("flags\t\t: fpu vme vmx sse\n"));
        assert!(!cpu_has_hardware_virt("flags\t\t: fpu vme hypervisor\n"));
    }
}
