//! The options as a command line gives them (clap `Args`, for the preemptlab binary to flatten), turned
//! into [`VmOptions`]: the model parsed, the memory size and the boot timeout read, and where the guest
//! command's result goes by default.

use std::path::PathBuf;

use results::host::kernel::PreemptModel;
use results::Kind;

use crate::{AccelRequest, GuestArch, VmError, VmOptions};

/// `vm`'s options as given.
#[derive(Debug, clap::Args)]
pub struct VmArgs {
    /// List the bootable kernels: name, architecture, models offered (default marked *), rseq slice
    /// extension (with --arch: that architecture's only).
    #[arg(long)]
    pub list: bool,
    /// The guest's architecture: x86_64 (shares this host's root) or arm64 (Debian's arm64 kernels under
    /// qemu-system-aarch64 -M virt -cpu max, TCG, on the arm64 root of scripts/arm64-root, running the
    /// binary of scripts/cross-arm64). Default: this host's.
    #[arg(long)]
    pub arch: Option<String>,
    /// An arm64 guest's root filesystem (default: $PREEMPTLAB_ARM64_ROOT or /var/cache/preemptlab/arm64-root).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// The arm64 preemptlab an arm64 guest runs (default: target/aarch64-unknown-linux-gnu/release/preemptlab
    /// beside this binary's build, else the root's /usr/bin/preemptlab).
    #[arg(long)]
    pub guest_exe: Option<PathBuf>,
    /// Kernel: a name from --list, a short version (6.18, 7.2) or a vmlinuz path.
    #[arg(long)]
    pub kernel: Option<String>,
    /// Preemption model to boot (preempt= on the kernel command line): none, voluntary, full, lazy.
    #[arg(long)]
    pub preempt: Option<String>,
    /// Boot with the --preempt model even when the kernel does not offer it (it ignores preempt= when not
    /// PREEMPT_DYNAMIC, or refuses the mode at boot): to see what the audit says of a host whose command line
    /// asks for a model its kernel cannot run.
    #[arg(long, requires = "preempt")]
    pub allow_ignored_preempt: bool,
    /// Guest vCPUs (default: this host's CPUs, never more).
    #[arg(long)]
    pub cpus: Option<u32>,
    /// Guest memory (512M, 2G).
    #[arg(long, default_value = "2G")]
    pub memory: String,
    /// Accelerator: KVM when it can boot a standard kernel (auto), or force one.
    #[arg(long, value_enum, default_value_t = VmAccel::Auto)]
    pub accel: VmAccel,
    /// More kernel command-line parameters.
    #[arg(long, allow_hyphen_values = true)]
    pub append: Option<String>,
    /// Give up (and stop the VM) when the guest has not started the command after this long.
    #[arg(long, default_value = "10m")]
    pub boot_timeout: String,
    /// The preemptlab command to run in the guest, after `--`.
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// The accelerator as the command line names it ([`AccelRequest`]'s choices, without their help).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum VmAccel {
    Auto,
    Kvm,
    Tcg,
}

impl VmArgs {
    /// The guest architecture asked for (None: not given), or the error naming the choices.
    pub fn arch(&self) -> Result<Option<GuestArch>, VmError> {
        self.arch
            .as_deref()
            .map(|a| GuestArch::parse(a).ok_or_else(|| VmError::UnknownArch(a.to_string())))
            .transpose()
    }

    /// The options to run with; `default_path(kind)` is where a command of that kind (`bench-lock`,
    /// `check`, `sim`) writes its result when not told.
    pub fn options(self, default_path: impl FnOnce(Kind) -> PathBuf) -> Result<VmOptions, VmError> {
        let model = |p: &String| match PreemptModel::parse(p) {
            Some(m) if m != PreemptModel::Rt => Ok(m),
            _ => Err(VmError::NotAModel(p.clone())),
        };
        let arch = self
            .arch()?
            .or_else(GuestArch::host)
            .unwrap_or(GuestArch::X86_64);
        let flag = self.preempt.as_ref().map(model).transpose()?;
        // A preempt= in --append is the model too: the same as --preempt or refused (the kernel takes the
        // last one it reads, so `--preempt lazy --append preempt=none` silently booted none), and checked
        // against the kernel as --preempt is. It leaves --append; the model goes on the command line once.
        let (appended, append) = split_preempt(self.append.as_deref());
        let appended = appended.as_ref().map(model).transpose()?;
        let preempt = match (flag, appended) {
            (Some(f), Some(a)) if f != a => {
                return Err(VmError::PreemptConflict {
                    preempt: f.to_string(),
                    appended: a.to_string(),
                })
            }
            (f, a) => f.or(a),
        };
        let memory = results::host::bytes::size(&self.memory).map_err(|e| VmError::Memory(e.0))?;
        let boot_timeout =
            hostfacts::duration::duration(&self.boot_timeout).map_err(VmError::BootTimeout)?;
        Ok(VmOptions {
            default_out: result_kind(&self.command).map(default_path),
            boot_timeout,
            kernel: self.kernel,
            preempt,
            cpus: self.cpus,
            memory_mib: Some(memory.0 >> 20),
            accel: match self.accel {
                VmAccel::Auto => AccelRequest::Auto,
                VmAccel::Kvm => AccelRequest::Kvm,
                VmAccel::Tcg => AccelRequest::Tcg,
            },
            append,
            command: self.command,
            exe: std::env::current_exe().map_err(|e| VmError::io("finding this binary", e))?,
            arch,
            allow_ignored_preempt: self.allow_ignored_preempt,
            root: self.root,
            guest_exe: self.guest_exe,
        })
    }
}

/// The `preempt=` words of a kernel command line (the last one, as the kernel reads it; several that
/// disagree are refused by the caller as a conflict with themselves), and the line without them.
fn split_preempt(append: Option<&str>) -> (Option<String>, Option<String>) {
    let Some(a) = append else {
        return (None, None);
    };
    let mut model = None;
    let rest: Vec<&str> = a
        .split_whitespace()
        .filter(|w| match w.strip_prefix("preempt=") {
            Some(m) => {
                model = Some(m.to_string());
                false
            }
            None => true,
        })
        .collect();
    let rest = (!rest.is_empty()).then(|| rest.join(" "));
    (model, rest)
}

/// The kind of result a guest command writes by default (`bench-lock`, `check`, `sim`), if it writes one:
/// the host writes it where the command would have, not on the guest's read-only view of the host's disk.
pub fn result_kind(command: &[String]) -> Option<Kind> {
    match command
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["bench", b, ..] => Kind::from_name(&format!("bench-{b}")),
        ["check", ..] => Some(Kind::Check),
        ["sim", ..] => Some(Kind::Sim),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(preempt: Option<&str>, memory: &str, command: &[&str]) -> VmArgs {
        VmArgs {
            list: false,
            arch: None,
            allow_ignored_preempt: false,
            root: None,
            guest_exe: None,
            kernel: None,
            preempt: preempt.map(String::from),
            cpus: None,
            memory: memory.into(),
            accel: VmAccel::Tcg,
            append: None,
            boot_timeout: "10m".into(),
            command: command.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn converts_and_names_the_field() {
        let o = args(Some("lazy"), "512M", &["bench", "lock"])
            .options(|k| PathBuf::from(format!("results/{k}.json")))
            .unwrap();
        assert_eq!(o.preempt, Some(PreemptModel::Lazy));
        assert_eq!(o.memory_mib, Some(512));
        assert_eq!(
            o.default_out,
            Some(PathBuf::from("results/bench-lock.json"))
        );
        assert_eq!(o.accel, AccelRequest::Tcg);
        let flag = |o: &str| format!("--{}", o.replace('_', "-"));
        let e = args(Some("rt"), "2G", &["audit"]).options(|_| unreachable!());
        assert_eq!(
            e.unwrap_err().render(flag),
            "--preempt rt: not a model (use none, voluntary, full or lazy)"
        );
        let e = args(None, "x", &["audit"]).options(|_| unreachable!());
        assert!(e
            .unwrap_err()
            .to_string()
            .starts_with("memory: \"x\" is not a size"));
        assert_eq!(result_kind(&["audit".into()]), None);
        assert_eq!(
            result_kind(&["bench".into(), "net".into()]),
            Some(Kind::BenchNet)
        );
    }

    #[test]
    fn the_architecture_is_one_a_guest_can_have() {
        let flag = |o: &str| format!("--{}", o.replace('_', "-"));
        let mut a = args(None, "2G", &["audit"]);
        a.arch = Some("sparc".into());
        let e = a.options(|_| unreachable!()).unwrap_err();
        assert_eq!(
            e.render(flag),
            "--arch sparc: not an architecture a guest can have; use x86_64 or arm64"
        );
        let mut a = args(None, "2G", &["audit"]);
        a.arch = Some("aarch64".into());
        assert_eq!(
            a.options(|_| unreachable!()).unwrap().arch,
            GuestArch::Arm64
        );
    }

    /// Regression (issue 29): `vm --preempt lazy --append preempt=none` silently booted none.
    #[test]
    fn a_preempt_in_append_is_the_model_or_a_conflict() {
        let flag = |o: &str| format!("--{}", o.replace('_', "-"));
        let with = |preempt: Option<&str>, append: &str| {
            let mut a = args(preempt, "2G", &["audit"]);
            a.append = Some(append.into());
            a.options(|_| unreachable!())
        };
        let e = with(Some("lazy"), "quiet preempt=none").unwrap_err();
        assert_eq!(
            e.render(flag),
            "--preempt lazy and preempt=none in --append: two different models; give one of them"
        );
        let o = with(Some("full"), "preempt=full nokaslr").unwrap();
        assert_eq!(
            (o.preempt, o.append.as_deref()),
            (Some(PreemptModel::Full), Some("nokaslr"))
        );
        let o = with(None, "preempt=none").unwrap();
        assert_eq!((o.preempt, o.append), (Some(PreemptModel::None), None));
        assert!(matches!(
            with(None, "preempt=sometimes"),
            Err(VmError::NotAModel(_))
        ));
    }
}
