//! What the host hands the guest, and reads back from its console (pure): the guest script, the kernel
//! parameters (the guest's own ID among them), virtme-ng's arguments, the command's `--out`, the kernel's
//! module tree, and whether a boot panicked before the command started.

use std::path::{Path, PathBuf};

use results::host::kernel::PreemptModel;

use crate::accel::Accel;
use crate::kernels::Kernel;

/// Quotes a word for sh.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Finds the command's `--out FILE` / `--out=FILE` (or `-o FILE`, `report`'s spelling): (index of the
/// value's word, the value, whether the word is `--out=FILE`).
pub fn find_out_arg(command: &[String]) -> Option<(usize, String, bool)> {
    let mut found = None;
    let mut i = 0;
    while i < command.len() {
        let w = &command[i];
        if w == "--" {
            break;
        }
        if (w == "--out" || w == "-o") && i + 1 < command.len() {
            found = Some((i + 1, command[i + 1].clone(), false));
            i += 1;
        } else if let Some(v) = w.strip_prefix("--out=") {
            found = Some((i, v.to_string(), true));
        }
        i += 1;
    }
    found
}

/// The module tree of a kernel unpacked from a package (`<root>/usr/lib/modules/<name>` or
/// `<root>/lib/modules/<name>` holding `modules.dep`, `<root>` an ancestor of the image), or the image's own
/// directory when it holds `modules.dep`; None for a build without modules.
pub fn module_tree(k: &Kernel) -> Option<PathBuf> {
    let has_dep = |d: &Path| d.join("modules.dep").is_file();
    let dir = k.image.parent()?;
    if has_dep(dir) {
        return Some(dir.to_path_buf());
    }
    k.image.ancestors().skip(1).take(4).find_map(|root| {
        ["usr/lib/modules", "lib/modules"]
            .iter()
            .map(|t| root.join(t).join(&k.name))
            .find(|d| has_dep(d))
    })
}

/// The guest's clocksource in use, read before and after the command.
const CLOCKSOURCE: &str = "/sys/devices/system/clocksource/clocksource0/current_clocksource";

/// The guest script (pure): `dir` is the shared directory, `argv` the full command line to run, `config`
/// and `modules` the booted kernel's config file and module tree when the host has them: the guest sees
/// the host's root filesystem, whose /boot and module trees belong to the host's kernel, so they are put
/// where the guest kernel's tools look (`/boot/config-RELEASE` for the audit, `/usr/lib/modules/RELEASE`
/// for modprobe, e.g. veth for `bench net --netns`), on tmpfs mounts that exist only in the guest.
pub fn guest_script(
    dir: &Path,
    argv: &[String],
    config: Option<&Path>,
    modules: Option<&Path>,
) -> String {
    let d = sh_quote(&dir.display().to_string());
    let cmd: Vec<String> = argv.iter().map(|a| sh_quote(a)).collect();
    // What fails here is reported on the host (`setup-stderr`), not fatal: the command still runs.
    let mut setup = String::from("r=$(uname -r)\ne=\"$d/setup-stderr\"\n");
    if let Some(c) = config {
        setup.push_str(&format!(
            "[ -e \"/boot/config-$r\" ] || {{ mount -t tmpfs preemptlab-boot /boot 2>>\"$e\" && cp {} \"/boot/config-$r\" 2>>\"$e\"; }}\n",
            sh_quote(&c.display().to_string())
        ));
    }
    if let Some(m) = modules {
        // virtme-ng links a module tree it knows of itself; /usr is a writable overlay in its guests.
        setup.push_str(&format!(
            "[ -e \"/usr/lib/modules/$r/modules.dep\" ] || {{ mkdir -p \"/usr/lib/modules/$r\" 2>>\"$e\" && mount --bind {} \"/usr/lib/modules/$r\" 2>>\"$e\"; }}\n",
            sh_quote(&m.display().to_string())
        ));
    }
    format!(
        "#!/bin/sh\n\
         # preemptlab vm: runs in the guest as root\n\
         d={d}\n\
         {setup}\
         grep -q ' /sys/kernel/debug debugfs ' /proc/mounts || mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null\n\
         cat /proc/uptime > \"$d/uptime\"\n\
         cat /proc/cmdline > \"$d/cmdline\"\n\
         uname -r > \"$d/release\"\n\
         cat /sys/kernel/debug/sched/preempt > \"$d/preempt-before\" 2>/dev/null\n\
         cat {cs} > \"$d/clocksource-before\" 2>/dev/null\n\
         : > \"$d/started\"\n\
         {cmd} > \"$d/stdout\" 2> \"$d/stderr\" < /dev/null\n\
         echo $? > \"$d/status.tmp\"\n\
         cat /sys/kernel/debug/sched/preempt > \"$d/preempt-after\" 2>/dev/null\n\
         cat {cs} > \"$d/clocksource-after\" 2>/dev/null\n\
         mv \"$d/status.tmp\" \"$d/status\"\n",
        cmd = cmd.join(" "),
        cs = CLOCKSOURCE
    )
}

/// The kernel parameter that keeps a TCG guest on its TSC: under QEMU's software emulation the guest's TSC is
/// the host's own (QEMU reads the host's counter), but the guest's clocksource watchdog compares it with an
/// emulated HPET read from a busy vCPU and, seconds to minutes into a boot, finds a "frequency skew" of a few
/// hundredths of a percent, marks the TSC unstable and switches the guest to the HPET. From then on every
/// clock read is a system call and an emulated device access instead of a vDSO read, and everything that
/// times itself slows down: the cells of a `bench lock` run in a 7.2 guest to 0.31-0.59x of their
/// throughput on the TSC (docs/vm.md, "The guest's clock").
pub const TCG_CLOCK_PARAM: &str = "tsc=reliable";

/// The clock parameter a guest gets (pure): [`TCG_CLOCK_PARAM`] under TCG on a host whose own TSC runs at a
/// constant rate and through idle states (`host_tsc_stable`: QEMU hands the guest the host's counter), unless
/// the caller's `append` already says how to treat the TSC or which clocksource to use.
pub fn clock_param(
    accel: Accel,
    append: Option<&str>,
    host_tsc_stable: bool,
) -> Option<&'static str> {
    let named = append.is_some_and(|a| {
        a.split_whitespace()
            .any(|w| w.starts_with("tsc=") || w.starts_with("clocksource="))
    });
    (accel == Accel::Tcg && host_tsc_stable && !named).then_some(TCG_CLOCK_PARAM)
}

/// Whether the host's TSC runs at a constant rate and through idle states (the `constant_tsc` and
/// `nonstop_tsc` flags of /proc/cpuinfo's first CPU).
pub fn host_tsc_stable(cpuinfo: &str) -> bool {
    let Some(flags) = cpuinfo.lines().find(|l| l.starts_with("flags")) else {
        return false;
    };
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

/// The kernel parameters the guest boots with (pure): the model (`preempt=`), the clock parameter
/// ([`clock_param`]), the caller's `append`, and last the guest's identity (`identity`,
/// `preemptlab.host_id=...`: `hostfacts::hostid`), so that one in `append` does not override it (the guest
/// goes by the last).
pub fn kernel_append(
    preempt: Option<PreemptModel>,
    clock: Option<&str>,
    append: Option<&str>,
    identity: &str,
) -> String {
    preempt
        .map(|m| format!("preempt={m}"))
        .into_iter()
        .chain(clock.map(String::from))
        .chain(
            append
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(String::from),
        )
        .chain(std::iter::once(identity.to_string()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `args` with a read-only `--rodir` for each of `dirs` (at the same path in the guest), before `--exec`.
pub fn with_rodirs(mut args: Vec<String>, dirs: &[&Path]) -> Vec<String> {
    let at = args
        .iter()
        .position(|a| a == "--exec")
        .unwrap_or(args.len());
    let extra = dirs
        .iter()
        .flat_map(|d| ["--rodir".to_string(), d.display().to_string()]);
    args.splice(at..at, extra);
    args
}

/// vng's arguments (pure).
#[allow(clippy::too_many_arguments)]
pub fn vng_args(
    image: &Path,
    accel: Accel,
    cpus: u32,
    memory_mib: u64,
    append: &str,
    shared: &Path,
    script: &Path,
) -> Vec<String> {
    let mut v = vec![
        "--run".to_string(),
        image.display().to_string(),
        "--cpus".into(),
        cpus.to_string(),
        "--memory".into(),
        format!("{memory_mib}M"),
        "--user".into(),
        "root".into(),
        "--rwdir".into(),
        shared.display().to_string(),
        // The guest console goes to virtme-ng's log (never to the user): shown when the guest fails.
        "--verbose".into(),
        // QEMU names its threads, so that the vCPUs' times can be read on the host (`vcpus`).
        format!("--qemu-opts={}", crate::vcpus::QEMU_THREAD_NAMES),
    ];
    if accel == Accel::Tcg {
        v.push("--disable-kvm".into());
    }
    if !append.trim().is_empty() {
        v.push("--append".into());
        v.push(append.trim().to_string());
    }
    v.push("--exec".into());
    v.push(format!(
        "/bin/sh {}",
        sh_quote(&script.display().to_string())
    ));
    v
}

/// The console line that shows the guest kernel panicked (or oopsed) before the command started, if it
/// did: `Kernel panic - not syncing: ...` or `Oops: ...`, else a last line `Kernel Offset: ...` (what a
/// panic prints last). Under TCG about one boot in 30 of Debian's kernels dies this way in early boot (an
/// int3 Oops while static keys are patched: docs/notes/2026-11-23-vm-preemption-models.md), before
/// anything of ours ran; such a boot is worth another try, any other failure is not.
pub fn boot_panic(console: &str) -> Option<String> {
    let lines: Vec<&str> = console
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let strip = |l: &str| -> String {
        // A console line may carry the kernel's timestamp: "[    1.234567] Kernel panic - ...".
        let l = match l.strip_prefix('[').and_then(|r| r.split_once(']')) {
            Some((_, rest)) => rest.trim_start(),
            None => l,
        };
        l.chars().take(160).collect()
    };
    lines
        .iter()
        .find(|l| l.contains("Kernel panic - not syncing"))
        .or_else(|| lines.iter().find(|l| strip(l).starts_with("Oops: ")))
        .or_else(|| {
            lines
                .last()
                .filter(|l| strip(l).starts_with("Kernel Offset:"))
        })
        .map(|l| strip(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_panicked_boot_is_told_by_its_console() {
        let log = "virtme-ng 1.40\n[    0.912345] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\n[    0.9] RIP: sched_clock_cpu\n[    0.95] Kernel panic - not syncing: Attempted to kill the idle task!\n[    0.96] Kernel Offset: disabled\n";
        assert_eq!(
            boot_panic(log).as_deref(),
            Some("Kernel panic - not syncing: Attempted to kill the idle task!")
        );
        assert_eq!(
            boot_panic("x\n[ 0.5] Oops: int3: 0000 [#1]\nmore\n").as_deref(),
            Some("Oops: int3: 0000 [#1]")
        );
        // Issue 29: a 6.18 boot whose console ended with the offset line alone.
        assert_eq!(
            boot_panic("booting\n[    1.0] Kernel Offset: 0x1e000000 from 0xffffffff81000000\n")
                .as_deref(),
            Some("Kernel Offset: 0x1e000000 from 0xffffffff81000000")
        );
        // A guest that booted and failed otherwise, or timed out, did not panic.
        assert_eq!(
            boot_panic("virtme-init: starting\nqemu: terminating on signal 15\n"),
            None
        );
        assert_eq!(boot_panic(""), None);
    }

    #[test]
    fn out_argument_in_both_forms() {
        assert_eq!(
            find_out_arg(&s(&["bench", "lock", "--out", "r.json"])),
            Some((3, "r.json".into(), false))
        );
        assert_eq!(
            find_out_arg(&s(&["audit", "--out=a.json"])),
            Some((1, "a.json".into(), true))
        );
        assert_eq!(find_out_arg(&s(&["audit", "--format", "json"])), None);
        assert_eq!(
            find_out_arg(&s(&["report", "r.json", "-o", "p.html"])),
            Some((3, "p.html".into(), false))
        );
    }

    #[test]
    fn script_quotes_every_word() {
        let sc = guest_script(
            Path::new("/tmp/x y"),
            &s(&["/bin/preemptlab", "bench", "it's"]),
            None,
            None,
        );
        assert!(sc.contains("d='/tmp/x y'"));
        assert!(sc.contains("'/bin/preemptlab' 'bench' 'it'\\''s' > \"$d/stdout\""));
        assert!(sc.contains("mount -t debugfs"));
        assert!(!sc.contains("/boot") && !sc.contains("modules"));
        // The kernel's own config and modules where the guest's tools look, quoted.
        let sc = guest_script(
            Path::new("/tmp/s"),
            &s(&["/bin/preemptlab", "audit"]),
            Some(Path::new("/c/config-7.2 x")),
            Some(Path::new("/c/usr/lib/modules/7.2")),
        );
        assert!(sc.contains("cp '/c/config-7.2 x' \"/boot/config-$r\""));
        assert!(sc.contains("mount --bind '/c/usr/lib/modules/7.2' \"/usr/lib/modules/$r\""));
        assert!(sc.find("/boot").unwrap() < sc.find("\"$d/started\"").unwrap());
        // The clocksource before the command starts and after it ends.
        let before = sc.find("\"$d/clocksource-before\"").unwrap();
        assert!(before < sc.find("\"$d/started\"").unwrap());
        let after = sc.find("\"$d/clocksource-after\"").unwrap();
        assert!(sc.find("\"$d/status.tmp\"").unwrap() < after);
        assert!(after < sc.find("\"$d/status\"\n").unwrap());
    }

    #[test]
    fn module_tree_of_an_unpacked_package() {
        let t = tempfile::tempdir().unwrap();
        let m = t.path().join("usr/lib/modules/7.2.1");
        std::fs::create_dir_all(&m).unwrap();
        std::fs::write(m.join("modules.dep"), "").unwrap();
        std::fs::write(m.join("vmlinuz"), "").unwrap();
        let k = |image: PathBuf| Kernel {
            name: "7.2.1".into(),
            image,
            config: None,
        };
        // The image inside the module tree (Debian's 7.x packages) and in <root>/boot (6.x).
        assert_eq!(module_tree(&k(m.join("vmlinuz"))), Some(m.clone()));
        std::fs::create_dir_all(t.path().join("boot")).unwrap();
        assert_eq!(
            module_tree(&k(t.path().join("boot/vmlinuz-7.2.1"))),
            Some(m)
        );
        // A build directory without modules.
        let b = tempfile::tempdir().unwrap();
        assert_eq!(module_tree(&k(b.path().join("bzImage"))), None);
    }

    #[test]
    fn the_guests_identity_goes_last_on_its_command_line() {
        let id = "preemptlab.host_id=vm-d8d429a008ab4feaa0e218414c777cdd";
        assert_eq!(kernel_append(None, None, None, id), id);
        assert_eq!(
            kernel_append(
                Some(PreemptModel::None),
                Some(TCG_CLOCK_PARAM),
                Some(" nokaslr preemptlab.host_id=mine "),
                id
            ),
            format!("preempt=none tsc=reliable nokaslr preemptlab.host_id=mine {id}")
        );
        assert_eq!(
            hostfacts::hostid::guest_param(&kernel_append(
                None,
                None,
                Some("preemptlab.host_id=x"),
                id
            )),
            id.strip_prefix("preemptlab.host_id=")
        );
    }

    #[test]
    fn a_tcg_guest_keeps_its_tsc_unless_told_otherwise() {
        assert_eq!(clock_param(Accel::Tcg, None, true), Some("tsc=reliable"));
        assert_eq!(
            clock_param(Accel::Tcg, Some("nokaslr"), true),
            Some("tsc=reliable")
        );
        assert_eq!(clock_param(Accel::Kvm, None, true), None);
        // A host whose own TSC is not stable hands the guest an unstable one: the watchdog stays.
        assert_eq!(clock_param(Accel::Tcg, None, false), None);
        assert_eq!(
            clock_param(Accel::Tcg, Some("nokaslr tsc=unstable"), true),
            None
        );
        assert_eq!(
            clock_param(Accel::Tcg, Some("clocksource=hpet"), true),
            None
        );
        // A word that only ends in it is not the parameter.
        assert_eq!(
            clock_param(Accel::Tcg, Some("x.notsc=1"), true),
            Some("tsc=reliable")
        );
        let cpuinfo = |flags: &str| format!("processor\t: 0\nflags\t\t: fpu {flags} rdtscp\n");
        assert!(host_tsc_stable(&cpuinfo("tsc constant_tsc nonstop_tsc")));
        assert!(!host_tsc_stable(&cpuinfo("tsc constant_tsc")));
        assert!(!host_tsc_stable(&cpuinfo("tsc nonstop_tsc_s3")));
        assert!(!host_tsc_stable("processor\t: 0\n"));
    }

    #[test]
    fn vng_arguments() {
        let a = vng_args(
            Path::new("/k/vmlinuz"),
            Accel::Tcg,
            2,
            2048,
            "preempt=none ",
            Path::new("/tmp/s"),
            Path::new("/tmp/g.sh"),
        );
        let line = a.join(" ");
        assert!(line.starts_with(
            "--run /k/vmlinuz --cpus 2 --memory 2048M --user root --rwdir /tmp/s --verbose --qemu-opts=-name debug-threads=on --disable-kvm"
        ));
        assert!(line.ends_with("--append preempt=none --exec /bin/sh '/tmp/g.sh'"));
        let a = vng_args(
            Path::new("/k"),
            Accel::Kvm,
            1,
            512,
            "",
            Path::new("/s"),
            Path::new("/g"),
        );
        assert!(!a.contains(&"--disable-kvm".to_string()) && !a.contains(&"--append".to_string()));
        let a = with_rodirs(a, &[Path::new("/c/mods"), Path::new("/c/boot")]);
        assert!(a
            .join(" ")
            .ends_with("--rodir /c/mods --rodir /c/boot --exec /bin/sh '/g'"));
    }
}
