//! The `vm` block a result gets when it was measured inside a VM: pure data, the JSON schema of that block.

use serde::{Deserialize, Serialize};

/// How and where a result was measured inside a VM (`preemptlab vm`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VmBlock {
    /// `kvm` or `tcg` (QEMU's software emulation: every figure is far below bare metal).
    pub accelerator: String,
    /// Why that accelerator: what was asked and what the probe of /dev/kvm found.
    pub accelerator_why: String,
    /// `qemu-system-x86_64 --version`, first line.
    pub qemu_version: Option<String>,
    /// `vng --version`.
    pub virtme_ng_version: Option<String>,
    /// The host's kernel release (`uname -r`).
    pub host_kernel: String,
    /// Guest vCPUs.
    pub vcpus: u32,
    /// Guest memory, MiB.
    pub memory_mib: u64,
    /// The kernel image booted.
    pub kernel_image: String,
    /// The guest kernel's release as the guest reports it (`uname -r`).
    pub kernel_release: Option<String>,
    /// The guest kernel's command line (`/proc/cmdline` in the guest).
    pub kernel_cmdline: Option<String>,
    /// The guest's `/sys/kernel/debug/sched/preempt` before the command (active model in parentheses).
    pub guest_preempt_before: Option<String>,
    /// The same after the command (a `--switch-preempt` run must have switched back).
    pub guest_preempt_after: Option<String>,
    /// The guest's clocksource when the command began (`current_clocksource`): `tsc` for a guest that reads
    /// its clock in the vDSO; under TCG `vm` boots with `tsc=reliable` so that it stays so (docs/vm.md). Null
    /// in results written before it was recorded.
    #[serde(default)]
    pub guest_clocksource_before: Option<String>,
    /// The same when the command ended: another one than before means the guest switched clocks during the
    /// command (its TSC found unstable), and its timings before and after the switch are not comparable.
    #[serde(default)]
    pub guest_clocksource_after: Option<String>,
    /// Seconds from starting virtme-ng until the command began in the guest (QEMU start, kernel boot, init).
    pub boot_s: f64,
    /// The guest's uptime when the command began, seconds (kernel boot and init as the guest clock saw it).
    pub guest_uptime_at_start_s: Option<f64>,
    /// Seconds from starting virtme-ng until it exited.
    pub wall_s: f64,
    /// The share of the host's CPU capacity that other processes used meanwhile (all CPUs' busy time
    /// less the guest's and preemptlab's own), %: the guest's vCPUs are host threads, so a host busy with
    /// other work slows the guest unevenly; results with a few % or more here are disturbed. Null where
    /// unreadable or in results written before it was recorded.
    #[serde(default)]
    pub host_other_busy_pct: Option<f64>,
    /// Seconds from the command's start in the guest to its end, as the host saw them (the window of
    /// `host_vcpu_times`). Null where not seen, or in results written before it was recorded.
    #[serde(default)]
    pub command_s: Option<f64>,
    /// Each vCPU thread's time on a host CPU and waiting for one over that window (QEMU's named vCPU
    /// threads, `/proc/PID/task/TID/schedstat` on the host). A busy vCPU that waits has its guest slowed
    /// by the host, unseen inside the guest. Empty where not read (no named vCPU threads, or results written
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_vcpu_times: Vec<VcpuTime>,
    /// The command run in the guest (after `preemptlab`).
    pub command: Vec<String>,
    /// Boots it took: 1, or more when a boot panicked before the command started and was retried (`vm`
    /// boots at most [`MAX_BOOTS`] times). Results written before it was recorded read as 1.
    #[serde(default = "one")]
    pub boot_attempts: u32,
    /// Why each boot before the last was retried: the console line that shows the panic.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub boot_retries: Vec<String>,
}

/// One vCPU thread's time on the host over the command: on a host CPU, and runnable but waiting for one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VcpuTime {
    /// QEMU's name for the thread (`CPU 0/TCG`).
    pub name: String,
    /// Seconds on a host CPU.
    pub run_s: f64,
    /// Seconds runnable but waiting for a host CPU.
    pub wait_s: f64,
}

/// How many times `vm` boots a guest whose kernel panics before the command starts (TCG boots of Debian's
/// kernels do, about one in 30) before it gives up.
pub const MAX_BOOTS: u32 = 3;

fn one() -> u32 {
    1
}

impl VmBlock {
    /// One line on how the guest ran: kernel, accelerator and why, vCPUs, memory, boot and wall time, and
    /// the boots that panicked before it.
    pub fn summary(&self) -> String {
        let retried = match self.boot_attempts {
            0 | 1 => String::new(),
            n => format!(
                " (boot {n} of {MAX_BOOTS}: {} panicked before the command started)",
                n - 1
            ),
        };
        let waited = self
            .vcpu_wait_pct()
            .map(|p| format!("; its vCPUs waited {p:.1}% of their time for a host CPU"))
            .unwrap_or_default();
        format!(
            "{} ({}: {}), {} vCPUs, {} MiB: booted in {:.1} s{retried}, {:.1} s in all{waited}",
            self.kernel_release.as_deref().unwrap_or(&self.kernel_image),
            self.accelerator,
            self.accelerator_why,
            self.vcpus,
            self.memory_mib,
            self.boot_s,
            self.wall_s
        )
    }

    /// A warning when other processes used 5% or more of the host's CPU during the run.
    pub fn busy_warning(&self) -> Option<String> {
        let p = self.host_other_busy_pct.filter(|p| *p >= 5.0)?;
        Some(format!("other processes used {p:.0}% of the host's CPU meanwhile: the guest's figures are disturbed; measure on an idle host"))
    }

    /// A warning when the guest's clocksource changed during the command, or was not the architecture's
    /// counter from its start under TCG (booted with a `tsc=` or `clocksource=` of the caller's, or a TSC the
    /// kernel refused). An arm64 guest's counter is the architected timer (`arch_sys_counter`), read in the
    /// vDSO like the TSC and without a watchdog.
    pub fn clock_warning(&self) -> Option<String> {
        let before = self.guest_clocksource_before.as_deref()?;
        let after = self.guest_clocksource_after.as_deref()?;
        if before != after {
            Some(format!("the guest switched its clocksource from {before} to {after} during the command (its watchdog found the TSC unstable): timings before and after the switch are not comparable"))
        } else if !["tsc", "arch_sys_counter"].contains(&before) && self.accelerator == "tcg" {
            Some(format!("the guest's clocksource was {before}, not tsc: every clock read is slow under TCG and timed figures are far below a TSC guest's"))
        } else {
            None
        }
    }

    /// The vCPU threads' wait for a host CPU as a share of their time wanting one (run + wait), %; None
    /// without their times.
    pub fn vcpu_wait_pct(&self) -> Option<f64> {
        let (run, wait) = self
            .host_vcpu_times
            .iter()
            .fold((0.0, 0.0), |(r, w), t| (r + t.run_s, w + t.wait_s));
        (run + wait > 0.0).then(|| wait / (run + wait) * 100.0)
    }

    /// Every warning about how the guest ran ([`Self::busy_warning`], [`Self::clock_warning`]).
    pub fn warnings(&self) -> Vec<String> {
        self.busy_warning()
            .into_iter()
            .chain(self.clock_warning())
            .collect()
    }
}

/// Adds `vm` to a JSON object's text (a result file or a command's JSON output); `None` when the text is
/// not one JSON object.
pub fn with_vm_block(json_text: &str, block: &VmBlock) -> Option<String> {
    let mut value: serde_json::Value = serde_json::from_str(json_text).ok()?;
    let obj = value.as_object_mut()?;
    obj.insert("vm".into(), serde_json::to_value(block).ok()?);
    let mut out = serde_json::to_string_pretty(&value).ok()?;
    if json_text.ends_with('\n') {
        out.push('\n');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block() -> VmBlock {
        VmBlock {
            accelerator: "tcg".into(),
            accelerator_why: "asked for tcg".into(),
            qemu_version: Some("QEMU emulator version 7.2.22".into()),
            virtme_ng_version: Some("virtme-ng 1.42".into()),
            host_kernel: "6.18.44".into(),
            vcpus: 2,
            memory_mib: 2048,
            kernel_image: "/k/vmlinuz".into(),
            kernel_release: Some("7.2.13+deb14-amd64".into()),
            kernel_cmdline: Some("console=ttyS0 preempt=full".into()),
            guest_preempt_before: Some("full (lazy)".into()),
            guest_preempt_after: Some("full (lazy)".into()),
            guest_clocksource_before: Some("tsc".into()),
            guest_clocksource_after: Some("tsc".into()),
            boot_s: 12.5,
            guest_uptime_at_start_s: Some(4.2),
            host_other_busy_pct: Some(0.4),
            wall_s: 20.0,
            command_s: Some(7.0),
            host_vcpu_times: vec![
                VcpuTime {
                    name: "CPU 0/TCG".into(),
                    run_s: 6.0,
                    wait_s: 1.0,
                },
                VcpuTime {
                    name: "CPU 1/TCG".into(),
                    run_s: 3.0,
                    wait_s: 0.0,
                },
            ],
            command: vec!["audit".into()],
            boot_attempts: 1,
            boot_retries: Vec::new(),
        }
    }

    #[test]
    fn adds_the_block_to_an_object_and_round_trips() {
        let text = with_vm_block("{\"kind\":\"audit\"}\n", &block()).unwrap();
        assert!(text.ends_with('\n'));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["kind"], "audit");
        let back: VmBlock = serde_json::from_value(v["vm"].clone()).unwrap();
        assert_eq!(back, block());
    }

    #[test]
    fn says_how_the_guest_ran() {
        let mut b = block();
        assert_eq!(
            b.summary(),
            "7.2.13+deb14-amd64 (tcg: asked for tcg), 2 vCPUs, 2048 MiB: booted in 12.5 s, 20.0 s in all; its vCPUs waited 10.0% of their time for a host CPU"
        );
        assert_eq!(b.busy_warning(), None);
        assert_eq!(b.vcpu_wait_pct(), Some(10.0));
        b.boot_attempts = 2;
        assert!(b
            .summary()
            .contains("booted in 12.5 s (boot 2 of 3: 1 panicked before the command started)"));
        // A block written before the boots were counted reads as one boot.
        let mut v = serde_json::to_value(block()).unwrap();
        v.as_object_mut().unwrap().remove("boot_attempts");
        assert_eq!(
            serde_json::from_value::<VmBlock>(v).unwrap().boot_attempts,
            1
        );
        b.host_other_busy_pct = Some(12.4);
        assert!(b
            .busy_warning()
            .unwrap()
            .starts_with("other processes used 12% "));
        assert_eq!(b.warnings().len(), 1);
    }

    #[test]
    fn warns_of_a_clock_that_switched_or_was_slow() {
        let mut b = block();
        assert_eq!(b.clock_warning(), None);
        b.guest_clocksource_after = Some("hpet".into());
        assert!(b
            .clock_warning()
            .unwrap()
            .starts_with("the guest switched its clocksource from tsc to hpet"));
        b.guest_clocksource_before = Some("hpet".into());
        assert!(b
            .clock_warning()
            .unwrap()
            .starts_with("the guest's clocksource was hpet, not tsc"));
        // An arm64 guest's own counter is no slow clock.
        let mut arm = b.clone();
        arm.guest_clocksource_before = Some("arch_sys_counter".into());
        arm.guest_clocksource_after = Some("arch_sys_counter".into());
        assert_eq!(arm.clock_warning(), None);
        b.accelerator = "kvm".into();
        assert_eq!(b.clock_warning(), None);
        // Results written before the clocksource was recorded say nothing.
        let mut v = serde_json::to_value(block()).unwrap();
        v.as_object_mut()
            .unwrap()
            .remove("guest_clocksource_before");
        let old: VmBlock = serde_json::from_value(v).unwrap();
        assert_eq!(old.guest_clocksource_before, None);
        assert_eq!(old.clock_warning(), None);
    }

    #[test]
    fn leaves_non_objects_alone() {
        assert!(with_vm_block("[1,2]", &block()).is_none());
        assert!(with_vm_block("not json", &block()).is_none());
        assert!(with_vm_block("", &block()).is_none());
    }
}
