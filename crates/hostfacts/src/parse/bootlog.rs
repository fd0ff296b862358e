//! The boot log (dmesg, journal): the `Dynamic Preempt:` lines (kernel/sched/core.c).

/// The mode of the latest boot's last `Dynamic Preempt: <mode>` line (logged at boot and at each debugfs switch),
/// from `dmesg`, raw `/dev/kmsg` records, syslog or a journal export (`MESSAGE=` lines). A line saying that the
/// command line's mode was refused (`Dynamic Preempt: unsupported mode: none`) names no mode.
pub fn boot_log_preempt(log: &str) -> Option<String> {
    latest_boot(log)
        .lines()
        .filter_map(|l| {
            l.split_once("Dynamic Preempt: ")
                .map(|(_, m)| m.trim().to_string())
        })
        .rfind(|m| !m.starts_with("unsupported mode"))
}

/// The mode the kernel refused at the latest boot (`Dynamic Preempt: unsupported mode: none`, printed by
/// kernel/sched/core.c setup_preempt_mode when `preempt=` names a mode the kernel does not offer).
pub fn boot_log_refused(log: &str) -> Option<String> {
    latest_boot(log)
        .lines()
        .filter_map(|l| {
            l.split_once("Dynamic Preempt: unsupported mode:")
                .map(|(_, m)| m.trim().to_string())
        })
        .next_back()
}

/// The kernel log of the latest boot in `log`: what follows the last `Linux version ` banner (the first line
/// the kernel prints at each boot), so that a log file holding several boots (`/var/log/kern.log`) speaks for
/// the running one; all of it when there is no banner (a ring buffer that wrapped past it).
pub(crate) fn latest_boot(log: &str) -> &str {
    match log.rfind("Linux version ") {
        Some(i) => &log[i..],
        None => log,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_log_in_both_formats() {
        assert_eq!(
            boot_log_preempt("6,88,243510,-;Dynamic Preempt: none\n").as_deref(),
            Some("none")
        );
        assert_eq!(
            boot_log_preempt("[    0.2] Dynamic Preempt: lazy\n").as_deref(),
            Some("lazy")
        );
        assert_eq!(boot_log_preempt("nothing here"), None);
    }

    /// A 7.x kernel booted with `preempt=none` refuses it and runs its default (kernel/sched/core.c
    /// setup_preempt_mode, then preempt_dynamic_init); a log of several boots speaks for the last.
    #[test]
    fn boot_log_refused_mode_and_the_latest_boot() {
        let log = "[    0.0] Linux version 6.18.15+deb13-amd64\n[    0.1] Dynamic Preempt: none\n\
                   [    0.0] Linux version 7.2.13+deb14-amd64\n\
                   [    0.0] Dynamic Preempt: unsupported mode: none\n\
                   [    0.2] Dynamic Preempt: lazy\n";
        assert_eq!(boot_log_preempt(log).as_deref(), Some("lazy"));
        assert_eq!(boot_log_refused(log).as_deref(), Some("none"));
        let older = &log[..log.find("[    0.0] Linux version 7").unwrap()];
        assert_eq!(boot_log_refused(older), None);
        assert_eq!(boot_log_preempt(older).as_deref(), Some("none"));
        // A journal export (`journalctl -k -o export`).
        let export = "__CURSOR=s=1\nMESSAGE=Linux version 7.2.13\n\n__CURSOR=s=2\nMESSAGE=Dynamic Preempt: lazy\n";
        assert_eq!(boot_log_preempt(export).as_deref(), Some("lazy"));
    }
}
