//! Bracketed choices, `always [madvise] never`: /sys/kernel/mm/transparent_hugepage/* and the like
//! (`Documentation/admin-guide/mm/transhuge.rst`).

/// The selected value of a sysfs choice file such as `always [madvise] never`.
pub fn bracketed(text: &str) -> Option<String> {
    let start = text.find('[')?;
    let end = text[start..].find(']')? + start;
    Some(text[start + 1..end].to_string())
}

/// The options offered by a sysfs choice file, without brackets.
pub fn choices(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| {
            w.trim_matches(|c| c == '[' || c == ']' || c == '(' || c == ')')
                .to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_and_bracketed() {
        assert_eq!(
            bracketed("always [madvise] never").as_deref(),
            Some("madvise")
        );
        assert_eq!(
            bracketed("always within_size advise [never] deny force").as_deref(),
            Some("never")
        );
        assert_eq!(bracketed("nothing"), None);
        assert_eq!(
            choices("always [madvise] never"),
            vec!["always", "madvise", "never"]
        );
    }
}
