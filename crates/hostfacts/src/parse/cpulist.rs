//! CPU lists, `0-3,8,10-11`: /sys/devices/system/cpu/online and the like
//! (`Documentation/admin-guide/cputopology.rst`).

use results::host::bytes::ParseError;

fn err(msg: impl Into<String>) -> ParseError {
    ParseError(msg.into())
}

/// Counts the CPUs in a list such as `0-3,8,10-11`.
pub fn cpu_list_count(text: &str) -> Result<u32, ParseError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(err("empty CPU list"));
    }
    let mut n = 0u32;
    for part in text.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let a: u32 = a
                    .parse()
                    .map_err(|_| err(format!("bad CPU range {part:?}")))?;
                let b: u32 = b
                    .parse()
                    .map_err(|_| err(format!("bad CPU range {part:?}")))?;
                if b < a {
                    return Err(err(format!("bad CPU range {part:?}")));
                }
                n += b - a + 1;
            }
            None => {
                part.parse::<u32>()
                    .map_err(|_| err(format!("bad CPU number {part:?}")))?;
                n += 1;
            }
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list_count("0-1\n").unwrap(), 2);
        assert_eq!(cpu_list_count("0-3,8,10-11").unwrap(), 7);
        assert!(cpu_list_count("").is_err());
        assert!(cpu_list_count("3-1").is_err());
        assert!(cpu_list_count("x").is_err());
    }
}
