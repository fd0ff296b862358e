//! The kernel's build configuration: /proc/config.gz (unpacked) or /boot/config-RELEASE.

use std::collections::BTreeMap;

/// Parses a kernel `.config`: `CONFIG_X=value` lines and `# CONFIG_X is not set` (recorded as `n`).
pub fn kernel_config(text: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("# ") {
            if let Some(name) = rest.strip_suffix(" is not set") {
                if name.starts_with("CONFIG_") {
                    map.insert(name.to_string(), "n".to_string());
                }
            }
        } else if line.starts_with("CONFIG_") {
            if let Some((k, v)) = line.split_once('=') {
                map.insert(k.to_string(), v.trim_matches('"').to_string());
            }
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_config_lines() {
        let c = kernel_config(
            "CONFIG_HZ=250\n# CONFIG_PREEMPT is not set\nCONFIG_LOCALVERSION=\"-fc\"\n# comment\n",
        );
        assert_eq!(c["CONFIG_HZ"], "250");
        assert_eq!(c["CONFIG_PREEMPT"], "n");
        assert_eq!(c["CONFIG_LOCALVERSION"], "-fc");
    }
}
