//! Durations and ages as a person gives them on the command line (`3s`, `500ms`, `2m`, `36 h`): one
//! reader for `--duration`, `--boot-timeout`, `fleet --stale` and the like.

/// A duration that does not parse or is out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not a number with an optional unit.
    #[error("{0:?} is not a duration (expected e.g. 3s, 500ms, 2m, 1h)")]
    NotADuration(String),
    /// Negative, or longer than 24 h.
    #[error("{0:?} is out of range (0 to 24 h)")]
    OutOfRange(String),
}

/// A duration's text split into its number and its unit's length in seconds: `500ms` -> ("500",
/// Some(0.001)), `1.5h` -> ("1.5", Some(3600.0)), `2` -> ("2", None). The units: `us`, `ms`, `s`, `m` or
/// `min`, `h`, `d`, `w`. Err(unit) for a unit it does not know. The one reader of durations and ages:
/// [`duration`] and `fleet::parse_age` differ only in what they accept of it.
pub fn duration_parts(text: &str) -> Result<(&str, Option<f64>), &str> {
    let t = text.trim();
    let num = t.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &t[num.len()..];
    let secs = match unit {
        "" => return Ok((num.trim(), None)),
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        "w" => 7.0 * 86_400.0,
        _ => return Err(unit),
    };
    Ok((num.trim(), Some(secs)))
}

/// Parses a human duration: `3s`, `500ms`, `200us`, `2m`, `1.5` (seconds), 0 to 24 h.
pub fn duration(text: &str) -> Result<std::time::Duration, DurationError> {
    let (num, unit_s) =
        duration_parts(text).map_err(|_| DurationError::NotADuration(text.into()))?;
    let mult = unit_s.unwrap_or(1.0);
    let v: f64 = num
        .parse()
        .map_err(|_| DurationError::NotADuration(text.into()))?;
    if !v.is_finite() || v < 0.0 || v * mult > 86_400.0 {
        return Err(DurationError::OutOfRange(text.into()));
    }
    Ok(std::time::Duration::from_secs_f64(v * mult))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        use std::time::Duration;
        assert_eq!(duration("3s").unwrap(), Duration::from_secs(3));
        assert_eq!(duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(duration("200us").unwrap(), Duration::from_micros(200));
        assert_eq!(duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(
            duration("soon").unwrap_err().to_string(),
            "\"soon\" is not a duration (expected e.g. 3s, 500ms, 2m, 1h)"
        );
        assert_eq!(
            duration("-1s"),
            Err(DurationError::OutOfRange("-1s".into()))
        );
        assert!(duration("25h").is_err() && duration("1441m").is_err());
        assert_eq!(duration("1d").unwrap(), Duration::from_secs(86_400));
        assert_eq!(duration_parts("36 h"), Ok(("36", Some(3600.0))));
    }
}
