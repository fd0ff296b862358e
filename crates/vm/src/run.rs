//! Running a command in a guest: the virtme-ng invocation, the guest script, timing and cleanup.
//!
//! The host makes a private temp dir and hands it to the guest with `vng --rwdir` (9p, mounted at the same
//! path over the guest's tmpfs overlay of /tmp). The guest script mounts debugfs if init did not, records
//! `/proc/uptime`, `/proc/cmdline` and `uname -r`, touches `started`, runs this binary with the command's
//! stdout, stderr and exit status going to files in that directory, and powers off (`vng --exec` ends the VM
//! when the command returns). A `--out FILE` of the command is pointed into that directory and the host
//! writes FILE itself, with the `vm` block added.
//!
//! vng and the QEMU it starts run in their own process group with stdin on /dev/null (a background group
//! reading the terminal would stop on SIGTTIN); a stop signal sets the flag of [`osutil::stop`] that the
//! wait loop polls, then the whole group gets SIGTERM and, after 3 s, SIGKILL. The same happens on every
//! error path when the group's guard (`boot::Group`) is dropped; the temp dir (and the private HOME given to
//! vng, so that its cache is not the user's) goes with [`tempfile::TempDir`].

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use hostfacts::hostid::{self, GuestSetup};
use hostfacts::Host;
use results::host::kernel::PreemptModel;

use crate::accel::{self, Accel, AccelRequest};
use crate::arch::{self, GuestArch};
use crate::boot::{boot_once, Attempt};
use crate::guest::{
    boot_panic, clock_param, find_out_arg, guest_script, host_tsc_stable, kernel_append,
    module_tree, vng_args, with_rodirs,
};
use crate::kernels::{self, Kernel, SearchPaths};
use crate::VmError;
use results::vm::{with_vm_block, VmBlock, MAX_BOOTS};

/// Default guest memory, MiB.
pub const DEFAULT_MEMORY_MIB: u64 = 2048;

/// Where `scripts/test-vm` installs virtme-ng (a Python venv).
pub const DEFAULT_VNG_VENV: &str = "/var/cache/preemptlab/virtme-ng";

/// What to run, and on what.
#[derive(Debug, Clone)]
pub struct VmOptions {
    /// A name from the list of kernels, a short version, or a vmlinuz path; None: the only kernel found.
    pub kernel: Option<String>,
    /// The model to boot (`preempt=` on the kernel command line).
    pub preempt: Option<PreemptModel>,
    /// vCPUs (default: the host's CPUs).
    pub cpus: Option<u32>,
    /// Guest memory, MiB.
    pub memory_mib: Option<u64>,
    /// The accelerator asked for.
    pub accel: AccelRequest,
    /// More kernel parameters.
    pub append: Option<String>,
    /// The preemptlab command to run in the guest (without the program name).
    pub command: Vec<String>,
    /// This binary (the guest runs it from the host's filesystem).
    pub exe: PathBuf,
    /// Where the result goes on the host when the command writes one by default (benches, `check`, `sim`:
    /// `results/<kind>-<time>.json`) and no `--out` was given: the guest's own default would land on its
    /// read-only view of the host's disk.
    pub default_out: Option<PathBuf>,
    /// Give up when the command has not started this long after virtme-ng did (a guest hung in boot).
    pub boot_timeout: Duration,
    /// The guest's architecture (default: the host's).
    pub arch: GuestArch,
    /// Boot with `preempt` even when the kernel does not offer it (the audit's view of such a host).
    pub allow_ignored_preempt: bool,
    /// An arm64 guest's root filesystem (None: [`arch::arm64_root`]'s default).
    pub root: Option<PathBuf>,
    /// The arm64 binary the guest runs (None: [`arch::guest_exe_candidates`]'s first that exists).
    pub guest_exe: Option<PathBuf>,
}

/// What came back.
#[derive(Debug, Clone)]
pub struct VmOutcome {
    /// The guest command's exit status.
    pub status: i32,
    /// Its stdout (a JSON object gets the `vm` block).
    pub stdout: Vec<u8>,
    /// Its stderr.
    pub stderr: Vec<u8>,
    /// How the guest was run.
    pub block: VmBlock,
    /// The result file written on the host (the command's `--out`), if any.
    pub out_file: Option<PathBuf>,
}

/// The host's CPUs this process may use (a guest gets at most as many vCPUs).
pub fn host_cpus() -> u32 {
    osutil::cpus::usable()
}

/// virtme-ng's `vng`: `$PREEMPTLAB_VNG`, then PATH, then the venv `scripts/test-vm` makes.
pub fn find_vng() -> Result<PathBuf, VmError> {
    if let Some(p) = std::env::var_os("PREEMPTLAB_VNG").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(VmError::ToolMissing {
                tool: format!("PREEMPTLAB_VNG={}", p.display()),
                fix: "point it at virtme-ng's vng".into(),
            })
        };
    }
    osutil::which("vng", &[])
        .or_else(|| Some(Path::new(DEFAULT_VNG_VENV).join("bin/vng")).filter(|p| p.is_file()))
        .ok_or_else(|| VmError::ToolMissing {
            tool: "virtme-ng (vng)".into(),
            fix: format!("run scripts/test-vm, or: python3 -m venv {DEFAULT_VNG_VENV} && {DEFAULT_VNG_VENV}/bin/pip install virtme-ng"),
        })
}

fn first_line_of(cmd: &Path, arg: &str) -> Option<String> {
    let out = Command::new(cmd)
        .arg(arg)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
}

/// The kernel of architecture `want` to boot and what it offers; checks the model asked for against it.
/// Only kernels of that architecture count for a short version (`7.2`); a kernel named in full (or by
/// path) that is of another architecture is refused, naming it.
pub fn pick_kernel(
    spec: Option<&str>,
    preempt: Option<PreemptModel>,
    want: GuestArch,
) -> Result<(Kernel, Option<kernels::Capabilities>), VmError> {
    let paths = SearchPaths::live();
    let host = GuestArch::host().unwrap_or(GuestArch::X86_64);
    let all = kernels::discover(&paths);
    let found = kernels::of_arch(all.clone(), want, host);
    let kernel = match spec {
        Some(s) => {
            let k = match kernels::resolve(s, &found, &paths.describe()) {
                Ok(k) => k,
                // Not among this architecture's: named in full among the others'? Then say whose it is.
                Err(e) => match kernels::resolve(s, &all, &paths.describe()) {
                    Ok(k) => k,
                    Err(_) => return Err(e),
                },
            };
            match kernels::arch_of(&k) {
                Some(is) if is != want => {
                    return Err(VmError::KernelArch {
                        kernel: k.name,
                        is,
                        asked: want,
                    })
                }
                _ => k,
            }
        }
        None => match found.as_slice() {
            [] => {
                return Err(VmError::NoKernels {
                    searched: paths.describe(),
                    arch: (want != host).then_some(want),
                })
            }
            [one] => one.clone(),
            many => {
                return Err(VmError::SeveralKernels {
                    found: many.iter().map(|k| k.name.clone()).collect(),
                })
            }
        },
    };
    kernels::check_image(&kernel)?;
    let caps = kernels::read_capabilities(&kernel).ok();
    if let (Some(m), Some(c)) = (preempt, &caps) {
        if !c.offered.is_empty() && !c.offered.contains(&m) {
            return Err(VmError::ModelNotOffered {
                option: "preempt",
                model: m.to_string(),
                kernel: kernel.name.clone(),
                offered: c.offered.iter().map(|m| m.to_string()).collect(),
            });
        }
    }
    Ok((kernel, caps))
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The last `lines` non-empty lines of a log file, for an error message, without NUL bytes (QEMU's console
/// can write hundreds before its reason) and read as UTF-8 where it is not.
pub(crate) fn tail(p: &Path, lines: usize) -> String {
    let bytes = std::fs::read(p).unwrap_or_default();
    osutil::tail(
        &String::from_utf8_lossy(&bytes).replace('\0', ""),
        lines,
        "\n",
    )
}

/// The guest's size, as [`check`] resolves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestSize {
    /// vCPUs.
    pub cpus: u32,
    /// Memory, MiB.
    pub memory_mib: u64,
}

/// Checks the options that need no kernel, tool or boot (the command is there and is not `vm`, the vCPUs
/// and memory, the boot timeout) and resolves the guest's size: what [`run`] checks first, for a caller
/// that checks the guest command against that size before anything boots.
pub fn check(opts: &VmOptions) -> Result<GuestSize, VmError> {
    match opts.command.first().map(String::as_str) {
        None => return Err(VmError::NoCommand),
        Some("vm") => return Err(VmError::Nested),
        Some(_) => {}
    }
    let host = host_cpus();
    let cpus = opts.cpus.unwrap_or(host);
    if cpus == 0 {
        return Err(VmError::NoCpus);
    }
    if cpus > host {
        return Err(VmError::TooManyCpus { asked: cpus, host });
    }
    let memory_mib = opts.memory_mib.unwrap_or(DEFAULT_MEMORY_MIB);
    if memory_mib < 256 {
        return Err(VmError::TooLittleMemory(memory_mib));
    }
    // QEMU cannot allocate more than the host's RAM: it failed 7-14 s into the run, its reason after a
    // line of NUL bytes on the console (issue 46 item 6). An unreadable /proc/meminfo leaves it to QEMU.
    let host_mib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| hostfacts::parse::kv_kib(&t).get("MemTotal").copied())
        .map(|kib| kib / 1024);
    if let Some(host_mib) = host_mib.filter(|&h| memory_mib > h) {
        return Err(VmError::TooMuchMemory {
            asked_mib: memory_mib,
            host_mib,
        });
    }
    if opts.boot_timeout.is_zero() {
        return Err(VmError::NoBootTimeout);
    }
    Ok(GuestSize { cpus, memory_mib })
}

/// The modes the guest command's `--switch-preempt MODE[,MODE...]` (or `--switch-preempt=...`) names,
/// every occurrence of the option (it may be given more than once).
fn switch_preempt_modes(command: &[String]) -> Vec<String> {
    let mut modes = Vec::new();
    let mut words = command.iter().take_while(|w| *w != "--");
    while let Some(w) = words.next() {
        let given = match w.strip_prefix("--switch-preempt=") {
            Some(m) => Some(m.to_string()),
            None if w == "--switch-preempt" => words.next().cloned(),
            None => None,
        };
        modes.extend(given.iter().flat_map(|g| g.split(',').map(str::to_string)));
    }
    modes
}

/// The kernel parameter that gives the guest its own ID (`hostfacts::hostid`): it sees the host's
/// /etc/machine-id, which would make its results the host's in `fleet`. The ID is the host's machine ID
/// hashed with what makes the guest the machine it is: the kernel image (its canonical path), the model it
/// boots (the one asked, else the kernel's default), its vCPUs and memory.
fn guest_identity(
    kernel: &Kernel,
    caps: Option<&kernels::Capabilities>,
    preempt: Option<PreemptModel>,
    vcpus: u32,
    memory_mib: u64,
) -> String {
    let image = std::fs::canonicalize(&kernel.image).unwrap_or_else(|_| kernel.image.clone());
    let model = preempt
        .or(caps.and_then(|c| c.default_model))
        .map_or_else(|| "default".to_string(), |m| m.to_string());
    hostid::guest_kernel_param(
        &Host::live(),
        &GuestSetup {
            kernel_image: &image.display().to_string(),
            preempt: &model,
            vcpus,
            memory_mib,
        },
    )
}

/// A bench's --switch-preempt to a model this kernel does not offer would fail in the guest, after the
/// boot: refused here instead.
fn refuse_unoffered_switch(
    opts: &VmOptions,
    kernel: &Kernel,
    caps: Option<&kernels::Capabilities>,
) -> Result<(), VmError> {
    let Some(c) = caps else { return Ok(()) };
    for mode in switch_preempt_modes(&opts.command) {
        let m = PreemptModel::parse(&mode);
        if !c.offered.is_empty() && m.is_some_and(|m| !c.offered.contains(&m)) {
            return Err(VmError::ModelNotOffered {
                option: "switch_preempt",
                model: mode,
                kernel: kernel.name.clone(),
                offered: c.offered.iter().map(|m| m.to_string()).collect(),
            });
        }
    }
    Ok(())
}

/// KVM or TCG, and why: a guest of another architecture is always emulated.
fn choose_accel(opts: &VmOptions, foreign: bool) -> Result<(Accel, String), VmError> {
    if !foreign {
        return accel::choose(opts.accel, &accel::probe()).map_err(VmError::KvmUnusable);
    }
    Ok((
        Accel::Tcg,
        format!(
            "an {} guest on an {} host: QEMU emulates its CPU (TCG)",
            opts.arch,
            GuestArch::host().map_or(std::env::consts::ARCH, GuestArch::as_str)
        ),
    ))
}

/// virtme-ng and the guest architecture's QEMU; busybox too for a guest on the host's root.
fn tools(opts: &VmOptions, own_root: bool) -> Result<(PathBuf, PathBuf), VmError> {
    let vng = find_vng()?;
    let (qemu_name, qemu_package) = opts.arch.qemu();
    let qemu = osutil::which(qemu_name, &[]).ok_or_else(|| VmError::ToolMissing {
        tool: qemu_name.into(),
        fix: format!("run scripts/test-vm, or: apt-get install {qemu_package}"),
    })?;
    if !own_root && osutil::which("busybox", &[]).is_none() && !Path::new("/bin/busybox").is_file()
    {
        return Err(VmError::ToolMissing {
            tool: "busybox".into(),
            fix: "run scripts/test-vm, or: apt-get install busybox-static".into(),
        });
    }
    Ok((vng, qemu))
}

/// The command as the guest runs it: `--out` added where the caller gives a default and the command has
/// none, and pointed at `guest_result` in the shared directory; with the `--out` as given (its position,
/// the host's path, whether written `--out=`).
fn pointed_command(
    opts: &VmOptions,
    guest_result: &Path,
) -> (Vec<String>, Option<(usize, String, bool)>) {
    let mut command = opts.command.clone();
    if find_out_arg(&command).is_none() {
        if let Some(dest) = &opts.default_out {
            let at = command
                .iter()
                .position(|w| w == "--")
                .unwrap_or(command.len());
            command.splice(at..at, ["--out".to_string(), dest.display().to_string()]);
        }
    }
    let out = find_out_arg(&command);
    if let Some((i, _, eq)) = &out {
        command[*i] = if *eq {
            format!("--out={}", guest_result.display())
        } else {
            guest_result.display().to_string()
        };
    }
    (command, out)
}

/// Boots until the command has run, again after a kernel panic before it started ([`boot_panic`]), up
/// to [`MAX_BOOTS`] boots in all; `say` is told of each retry. Returns the last boot, the command's exit
/// status and the retries' panic lines. `boot` is virtme-ng, its arguments, the PATH and HOME it runs
/// with.
fn boot_until_started(
    (vng, args, path_var, home): (&Path, &[String], &std::ffi::OsStr, &Path),
    shared: &Path,
    log_path: &Path,
    opts: &VmOptions,
    say: &mut dyn FnMut(&str),
) -> Result<(Attempt, i32, Vec<String>), VmError> {
    let status_file = shared.join("status");
    let mut boot_retries = Vec::new();
    let (attempt, status) = loop {
        let attempt = boot_once(vng, args, path_var, home, shared, log_path, opts)?;
        if let Some(s) = read_trim(&status_file).and_then(|s| s.parse::<i32>().ok()) {
            break (attempt, s);
        }
        let console = std::fs::read_to_string(log_path).unwrap_or_default();
        let panicked = attempt
            .boot
            .is_none()
            .then(|| boot_panic(&console))
            .flatten();
        match panicked {
            Some(line) if (boot_retries.len() as u32) + 1 < MAX_BOOTS => {
                say(&format!(
                    "the guest kernel panicked before the command started ({line}); booting again ({} of {MAX_BOOTS})",
                    boot_retries.len() + 2
                ));
                boot_retries.push(line);
            }
            _ => {
                return Err(VmError::GuestFailed {
                    why: match (attempt.boot, panicked) {
                        (Some(_), _) => "the command started but reported no exit status".into(),
                        (None, Some(_)) => format!(
                            "the guest kernel panicked before the command started, in all {MAX_BOOTS} boots"
                        ),
                        (None, None) => "the guest never reached the command".into(),
                    },
                    log_tail: osutil::tail(&console, 25, "\n"),
                })
            }
        }
    };
    Ok((attempt, status, boot_retries))
}

/// The result's `vm` block: the guest as booted and run, and the host beside it.
#[allow(clippy::too_many_arguments)]
fn vm_block(
    opts: &VmOptions,
    (accel, accel_why): (Accel, String),
    (qemu_version, vng_version): (Option<String>, Option<String>),
    (cpus, memory_mib): (u32, u64),
    kernel: &Kernel,
    shared: &Path,
    attempt: Attempt,
    boot_retries: Vec<String>,
) -> VmBlock {
    let Attempt {
        boot,
        wall,
        host_other_busy_pct,
        command,
        vcpu_times,
    } = attempt;
    VmBlock {
        accelerator: accel.as_str().into(),
        accelerator_why: accel_why,
        qemu_version,
        virtme_ng_version: vng_version,
        host_kernel: read_trim(Path::new("/proc/sys/kernel/osrelease")).unwrap_or_default(),
        vcpus: cpus,
        memory_mib,
        kernel_image: kernel.image.display().to_string(),
        kernel_release: read_trim(&shared.join("release")),
        kernel_cmdline: read_trim(&shared.join("cmdline")),
        boot_s: boot.unwrap_or(wall).as_secs_f64(),
        guest_preempt_before: read_trim(&shared.join("preempt-before")),
        guest_preempt_after: read_trim(&shared.join("preempt-after")),
        guest_clocksource_before: read_trim(&shared.join("clocksource-before")),
        guest_clocksource_after: read_trim(&shared.join("clocksource-after")),
        guest_uptime_at_start_s: read_trim(&shared.join("uptime"))
            .and_then(|u| u.split_whitespace().next()?.parse().ok()),
        wall_s: wall.as_secs_f64(),
        host_other_busy_pct,
        command_s: command.map(|c| c.as_secs_f64()),
        host_vcpu_times: vcpu_times,
        command: opts.command.clone(),
        boot_attempts: boot_retries.len() as u32 + 1,
        boot_retries,
    }
}

/// The command's stdout and stderr and its result file brought back from the shared directory, with the
/// `vm` block added to a JSON result and the host's path named where the guest named the shared one.
fn bring_back(
    shared: &Path,
    out: Option<(usize, String, bool)>,
    guest_result: &Path,
    block: VmBlock,
    status: i32,
) -> Result<VmOutcome, VmError> {
    let mut stdout = std::fs::read(shared.join("stdout")).unwrap_or_default();
    let mut stderr = std::fs::read(shared.join("stderr")).unwrap_or_default();
    if let Some(e) = read_trim(&shared.join("setup-stderr")).filter(|e| !e.is_empty()) {
        let mut said = format!(
            "preemptlab vm: the guest could not put the kernel's config or modules in place: {}\n",
            e.lines().next().unwrap_or_default()
        )
        .into_bytes();
        said.append(&mut stderr);
        stderr = said;
    }
    // The guest names its result file by the shared path, which is gone once we return: name the host's.
    if let (Some((_, host_path, _)), Ok(text)) = (&out, std::str::from_utf8(&stderr)) {
        stderr = text
            .replace(&guest_result.display().to_string(), host_path)
            .into_bytes();
    }
    if let Ok(text) = std::str::from_utf8(&stdout) {
        if text.trim_start().starts_with('{') {
            if let Some(t) = with_vm_block(text, &block) {
                stdout = t.into_bytes();
            }
        }
    }
    let mut out_file = None;
    if let Some((_, host_path, _)) = out {
        if let Ok(text) = std::fs::read_to_string(guest_result) {
            let text = with_vm_block(&text, &block).unwrap_or(text);
            let dest = PathBuf::from(&host_path);
            osutil::output::write_atomic(&dest, &text)?;
            out_file = Some(dest);
        }
    }
    Ok(VmOutcome {
        status,
        stdout,
        stderr,
        block,
        out_file,
    })
}

/// Boots the kernel, runs the command, brings back its output. The host is left as it was on every path.
/// A boot whose kernel panicked before the command started ([`boot_panic`]) is tried again, up to
/// [`MAX_BOOTS`] boots in all; `say` is told of each retry as it happens, and the result's `vm` block
/// records them.
pub fn run(opts: &VmOptions, say: &mut dyn FnMut(&str)) -> Result<VmOutcome, VmError> {
    let GuestSize { cpus, memory_mib } = check(opts)?;
    let foreign = Some(opts.arch) != GuestArch::host();
    if foreign && opts.accel == AccelRequest::Kvm {
        return Err(VmError::KvmForeign(opts.arch));
    }
    // An arm64 guest's root and binary, checked before anything else of the guest's.
    let arm64 = match opts.arch {
        GuestArch::Arm64 => Some(arch::Arm64Guest::find(
            opts.root.as_deref(),
            opts.guest_exe.as_deref(),
            &opts.exe,
        )?),
        GuestArch::X86_64 => None,
    };
    let checked = opts.preempt.filter(|_| !opts.allow_ignored_preempt);
    let (kernel, caps) = pick_kernel(opts.kernel.as_deref(), checked, opts.arch)?;
    refuse_unoffered_switch(opts, &kernel, caps.as_ref())?;
    let (accel, accel_why) = choose_accel(opts, foreign)?;
    let (vng, qemu) = tools(opts, arm64.is_some())?;
    osutil::stop::install_signal_flag()
        .map_err(|e| VmError::io("installing a signal handler", e.err))?;

    let tmp = tempfile::Builder::new()
        .prefix("preemptlab-vm-")
        .tempdir()
        .map_err(|e| VmError::io("creating a temp dir", e))?;
    let shared = tmp.path().join("shared");
    let home = tmp.path().join("home");
    for d in [&shared, &home] {
        std::fs::create_dir(d).map_err(|e| VmError::io(format!("creating {}", d.display()), e))?;
    }
    let guest_result = shared.join("result.json");
    let (command, out) = pointed_command(opts, &guest_result);
    // PostgreSQL builds under /var (scripts/pg-build's cache) are invisible in the guest unless handed in;
    // their names resolve against the cache the host uses.
    let pg_cache = osutil::pg_build_cache();
    let pg_dirs: Vec<PathBuf> = crate::pgdirs::pg_build_dirs(&command, &pg_cache)
        .into_iter()
        .filter(|d| d.is_dir())
        .collect();
    let mut argv = Vec::new();
    if !pg_dirs.is_empty() {
        argv.push("env".to_string());
        argv.push(format!("PREEMPTLAB_PG_CACHE={}", pg_cache.display()));
    }
    // The guest's binary: this one (the guest shares the host's root), or the arm64 one copied into a
    // directory of the temp dir handed to the guest.
    let guest_exe = match &arm64 {
        Some(a) => a.hand_in(tmp.path())?,
        None => opts.exe.clone(),
    };
    argv.push(guest_exe.display().to_string());
    argv.extend(command);
    // An arm64 guest sees none of the host's /tmp: its script goes beside its binary, in the directory it
    // is handed.
    let script = match (&arm64, guest_exe.parent()) {
        (Some(_), Some(dir)) => dir.join("guest.sh"),
        _ => tmp.path().join("guest.sh"),
    };
    let modules = module_tree(&kernel);
    std::fs::write(
        &script,
        guest_script(&shared, &argv, kernel.config.as_deref(), modules.as_deref()),
    )
    .map_err(|e| VmError::io(format!("writing {}", script.display()), e))?;

    let identity = guest_identity(&kernel, caps.as_ref(), opts.preempt, cpus, memory_mib);
    // The TSC is x86's: an arm64 guest's clock is the architected timer.
    let tsc_stable = opts.arch == GuestArch::X86_64
        && std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| host_tsc_stable(&c));
    let append = kernel_append(
        opts.preempt,
        clock_param(accel, opts.append.as_deref(), tsc_stable),
        opts.append.as_deref(),
        &identity,
    );
    let args = vng_args(
        &kernel.image,
        accel,
        cpus,
        memory_mib,
        &append,
        &shared,
        &script,
    );
    // virtme-ng's guests see /var, /usr, /tmp, ... as fresh overlays: a kernel unpacked under the cache
    // (/var/cache/preemptlab) is invisible there unless handed in, and with it its config and modules.
    let rodirs: Vec<&Path> = modules
        .as_deref()
        .into_iter()
        .chain(kernel.config.as_deref().and_then(Path::parent))
        .chain(pg_dirs.iter().map(PathBuf::as_path))
        .chain(guest_exe.parent().filter(|_| arm64.is_some()))
        .collect();
    let mut args = with_rodirs(args, &rodirs);
    if let Some(a) = &arm64 {
        args = a.vng_args(args);
    }
    let qemu_version = first_line_of(&qemu, "--version");
    let vng_version = first_line_of(&vng, "--version");
    let mut path_var = std::ffi::OsString::from(vng.parent().unwrap_or(Path::new("/")));
    if let Some(p) = std::env::var_os("PATH") {
        path_var.push(":");
        path_var.push(p);
    }
    let log_path = tmp.path().join("vng.log");
    let boot = (
        vng.as_path(),
        args.as_slice(),
        path_var.as_os_str(),
        home.as_path(),
    );
    let (attempt, status, boot_retries) = boot_until_started(boot, &shared, &log_path, opts, say)?;
    let versions = (qemu_version, vng_version);
    let block = vm_block(
        opts,
        (accel, accel_why),
        versions,
        (cpus, memory_mib),
        &kernel,
        &shared,
        attempt,
        boot_retries,
    );
    bring_back(&shared, out, &guest_result, block, status)
}

#[cfg(test)]
mod tests {
    /// Regression (issue 46 item 6): QEMU's reason for failing reached the message at the end of a line
    /// of 700-1,200 NUL bytes from its console.
    #[test]
    fn qemu_reason_after_a_line_of_nul_bytes_regression() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("vng.log");
        let mut text = vec![0u8; 1000];
        text.extend_from_slice(
            b"qemu-system-x86_64: cannot set up guest memory 'pc.ram': Cannot allocate memory\n",
        );
        std::fs::write(&log, &text).unwrap();
        assert_eq!(
            super::tail(&log, 25),
            "qemu-system-x86_64: cannot set up guest memory 'pc.ram': Cannot allocate memory"
        );
    }
}
