//! The kernel's command line, /proc/cmdline.

/// The value of `name=` on a kernel command line (the last one wins, as in the kernel).
pub fn cmdline_param(cmdline: &str, name: &str) -> Option<String> {
    let prefix = format!("{name}=");
    let mut found = None;
    for word in cmdline.split_whitespace() {
        if word == "--" {
            break; // what follows goes to init, not the kernel
        }
        if let Some(v) = word.strip_prefix(&prefix) {
            found = Some(v.to_string());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmdline_params_stop_at_double_dash() {
        let c = "console=ttyS0 preempt=full quiet -- preempt=none";
        assert_eq!(cmdline_param(c, "preempt").as_deref(), Some("full"));
        assert_eq!(cmdline_param("quiet", "preempt"), None);
        assert_eq!(
            cmdline_param("preempt=none preempt=lazy", "preempt").as_deref(),
            Some("lazy")
        );
    }
}
