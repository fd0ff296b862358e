//! `bench net`'s options as given, checked and resolved into a `net::Spec`.

use std::time::Duration;

use axes::NetTest;

use crate::options::{self, HostShape, OptionError};
use results::net::Spec;

/// Message sizes, bytes.
const MSG_BYTES: std::ops::RangeInclusive<usize> = 1..=16 << 20;

/// `bench net`'s options as given.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct NetOptions {
    /// Tests: tcp-stream, udp-stream, tcp-pingpong, udp-pingpong.
    #[cfg_attr(
        feature = "cli",
        arg(long, default_value = "tcp-stream,udp-stream,tcp-pingpong")
    )]
    pub tests: String,
    /// Message sizes (64, 1K, 16K, 64K).
    #[cfg_attr(feature = "cli", arg(long, default_value = "64,1K,16K,64K"))]
    pub msg_sizes: String,
    /// Connections (stream) or concurrent ping-pong pairs.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1))]
    pub streams: u32,
    /// Measured time per repetition.
    #[cfg_attr(feature = "cli", arg(long, default_value = "5s"))]
    pub duration: String,
    /// Repetitions per cell.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 3))]
    pub repeat: u32,
    /// Between two network namespaces over a veth pair the tool creates and removes (root).
    #[cfg_attr(feature = "cli", arg(long))]
    pub netns: bool,
}

impl NetOptions {
    /// Checks every option; `netns` needs `host` to be root.
    pub fn spec(&self, host: &HostShape) -> Result<Spec, OptionError> {
        let duration =
            options::duration_at_least("duration", &self.duration, Duration::from_millis(100))?;
        let msg_sizes = options::list(&self.msg_sizes)
            .iter()
            .map(|s| msg_size(s))
            .collect::<Result<Vec<_>, _>>()?;
        let spec = Spec {
            tests: options::names::<NetTest>("tests", &self.tests)?,
            msg_sizes,
            streams: self.streams,
            duration_s: duration.as_secs_f64(),
            repeat: self.repeat,
            netns: self.netns,
        };
        check(&spec)?;
        if spec.netns && !host.root {
            return Err(OptionError::NeedsRoot {
                option: "netns",
                does: "creates a network namespace and a veth pair",
                fix: "leave it out for loopback",
            });
        }
        Ok(spec)
    }
}

/// A message size: `64`, `1K`, `16K`, `64K`, `1M` (binary units, `results::host::bytes::size`), 1 byte to 16M.
pub fn msg_size(s: &str) -> Result<usize, OptionError> {
    let invalid = |why: &str| OptionError::Invalid {
        option: "msg_sizes",
        value: s.into(),
        why: why.into(),
    };
    let bytes = results::host::bytes::size(s)
        .map_err(|_| invalid("expected a byte count like 64, 1K, 16K"))?
        .0;
    match usize::try_from(bytes) {
        Ok(b) if MSG_BYTES.contains(&b) => Ok(b),
        _ => Err(invalid("1 byte..16M")),
    }
}

/// Checks a spec however it was made (`net::run` checks the one it is given); errors name the options by
/// field.
pub fn check(s: &Spec) -> Result<(), OptionError> {
    let invalid = |option, value: String, why: String| OptionError::Invalid { option, value, why };
    if s.tests.is_empty() || s.msg_sizes.is_empty() {
        return Err(OptionError::Empty {
            options: &["tests", "msg_sizes"],
        });
    }
    if let Some(b) = s.msg_sizes.iter().find(|b| !MSG_BYTES.contains(b)) {
        return Err(invalid("msg_sizes", b.to_string(), "1 byte..16M".into()));
    }
    if s.streams == 0 || s.streams > 1024 {
        return Err(invalid("streams", s.streams.to_string(), "1..1024".into()));
    }
    options::measured_seconds("duration", s.duration_s)?;
    options::repeat(s.repeat)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> NetOptions {
        NetOptions {
            tests: "udp-stream".into(),
            msg_sizes: "64,16K".into(),
            streams: 1,
            duration: "1s".into(),
            repeat: 1,
            netns: false,
        }
    }

    fn host(root: bool) -> HostShape {
        HostShape {
            cpus: 2,
            mem_total_kib: None,
            huge_page_kib: 2048,
            root,
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(msg_size("64").unwrap(), 64);
        assert_eq!(msg_size("16K").unwrap(), 16384);
        assert_eq!(msg_size("1M").unwrap(), 1 << 20);
        assert!(msg_size("0").is_err() && msg_size("x").is_err() && msg_size("32M").is_err());
        assert_eq!(
            opts().spec(&host(false)).unwrap().msg_sizes,
            vec![64, 16384]
        );
    }

    #[test]
    fn errors_name_the_field() {
        let flag = |o: &str| format!("--{}", o.replace('_', "-"));
        let e = |f: fn(&mut NetOptions), root| {
            let mut o = opts();
            f(&mut o);
            o.spec(&host(root)).unwrap_err().render(flag)
        };
        assert_eq!(e(|o| o.streams = 0, true), "--streams 0: 1..1024");
        assert_eq!(
            e(|o| o.msg_sizes = "12Q".into(), true),
            "--msg-sizes 12Q: expected a byte count like 64, 1K, 16K"
        );
        assert_eq!(
            e(|o| o.tests = ",".into(), true),
            "--tests and --msg-sizes need at least one entry each"
        );
        assert_eq!(
            e(|o| o.netns = true, false),
            "--netns creates a network namespace and a veth pair: run as root, or leave it out for loopback"
        );
        assert!(opts().spec(&host(false)).is_ok());
    }
}
