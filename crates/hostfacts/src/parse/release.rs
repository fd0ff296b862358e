//! The kernel release, /proc/sys/kernel/osrelease (`uname -r`).

/// A kernel release's major and minor numbers: `6.18.44-fc` -> (6, 18).
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(kernel_version("6.18.44-fc-v669"), Some((6, 18)));
        assert_eq!(kernel_version("7.0.0-rc3"), Some((7, 0)));
        assert_eq!(kernel_version("7.0"), Some((7, 0)));
        assert_eq!(kernel_version("garbage"), None);
    }
}
