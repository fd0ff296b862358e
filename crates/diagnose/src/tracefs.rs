//! The `sched:sched_switch` tracepoint: its id and the layout of its raw record, from tracefs.
//!
//! The record's fields are read at the offsets the kernel's own `format` file gives (they moved between
//! kernel versions: `prev_state` is a `long` since 4.x, `common_preempt_lazy_count` came and went), never
//! at offsets assumed here. When tracefs is not mounted, it is mounted in a private mount namespace of a
//! short-lived thread (unshare(CLONE_NEWNS) with private propagation, as `unshare -m` does): the host's
//! mount table never sees it, and it is gone when the thread ends.

use std::path::Path;

/// Where a field lies in the raw record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Byte offset.
    pub offset: usize,
    /// Size in bytes (4 or 8 for the integers read here).
    pub size: usize,
}

impl Field {
    /// Reads the field as a signed integer from a raw record (native endianness); None when the record is
    /// too short or the size is not 1, 2, 4 or 8.
    pub fn read(&self, raw: &[u8]) -> Option<i64> {
        let b = raw.get(self.offset..self.offset + self.size)?;
        Some(match self.size {
            1 => b[0] as i8 as i64,
            2 => i16::from_ne_bytes(b.try_into().ok()?) as i64,
            4 => i32::from_ne_bytes(b.try_into().ok()?) as i64,
            8 => i64::from_ne_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }
}

/// The fields of `sched_switch` this crate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedSwitch {
    /// The tracepoint's id (`perf_event_attr.config`).
    pub id: u64,
    /// `prev_pid`.
    pub prev_pid: Field,
    /// `prev_state`.
    pub prev_state: Field,
    /// `next_pid`.
    pub next_pid: Field,
}

/// Parses a tracepoint `format` file: the named field's offset and size.
pub fn field(format: &str, name: &str) -> Option<Field> {
    format.lines().find_map(|line| {
        let line = line.trim();
        let decl = line.strip_prefix("field:")?.split(';').next()?;
        // "pid_t prev_pid" or "char prev_comm[16]": the name is the last word, before any [.
        let last = decl.split_whitespace().last()?;
        if last.split('[').next()? != name {
            return None;
        }
        let num = |key: &str| -> Option<usize> {
            line.split(';')
                .find_map(|p| p.trim().strip_prefix(key))
                .and_then(|v| v.trim().parse().ok())
        };
        Some(Field {
            offset: num("offset:")?,
            size: num("size:")?,
        })
    })
}

/// Parses `sched_switch`'s `id` and `format` texts.
pub fn parse(id: &str, format: &str) -> Result<SchedSwitch, String> {
    let need = |n: &str| field(format, n).ok_or_else(|| format!("no field {n} in its format"));
    Ok(SchedSwitch {
        id: id
            .trim()
            .parse()
            .map_err(|_| format!("id {:?} is not a number", id.trim()))?,
        prev_pid: need("prev_pid")?,
        prev_state: need("prev_state")?,
        next_pid: need("next_pid")?,
    })
}

const EVENT: &str = "events/sched/sched_switch";

fn read_under(dir: &Path) -> std::io::Result<(String, String)> {
    let e = dir.join(EVENT);
    Ok((
        std::fs::read_to_string(e.join("id"))?,
        std::fs::read_to_string(e.join("format"))?,
    ))
}

/// Finds `sched_switch` in a mounted tracefs (`/sys/kernel/tracing`, `/sys/kernel/debug/tracing`), else
/// mounts one privately (see the module doc). The error says why neither worked.
pub fn sched_switch() -> Result<SchedSwitch, String> {
    for dir in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if let Ok((id, format)) = read_under(Path::new(dir)) {
            return parse(&id, &format);
        }
    }
    let (id, format) = std::thread::spawn(private_mount)
        .join()
        .map_err(|_| "the private tracefs mount panicked".to_string())??;
    parse(&id, &format)
}

fn private_mount() -> Result<(String, String), String> {
    let errno = || std::io::Error::last_os_error();
    // SAFETY: unshare takes flags only; CLONE_NEWNS (with the CLONE_FS it implies) affects this thread
    // alone, which ends right after.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return Err(format!(
            "tracefs is not mounted and a private mount namespace failed: {} (needs root)",
            errno()
        ));
    }
    let root = c"/";
    // SAFETY: valid NUL-terminated strings; null source, type and data are allowed for a propagation
    // change. This makes every mount of the new namespace private, so the tracefs mount below does not
    // propagate to the host's namespace.
    let rc = unsafe {
        libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(format!(
            "making a private mount namespace private: {}",
            errno()
        ));
    }
    let target = c"/sys/kernel/tracing";
    // SAFETY: valid NUL-terminated strings; tracefs takes no data.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(format!(
            "tracefs is not mounted and mounting it privately failed: {} (mount -t tracefs nodev /sys/kernel/tracing)",
            errno()
        ));
    }
    read_under(Path::new("/sys/kernel/tracing"))
        .map_err(|e| format!("reading {EVENT} in a private tracefs: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Linux 6.18's format (x86_64), as read on the development machine.
    const FORMAT_6_18: &str = "name: sched_switch
ID: 372
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;
\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;
";

    #[test]
    fn parses_the_format() {
        let s = parse("372\n", FORMAT_6_18).unwrap();
        assert_eq!(s.id, 372);
        assert_eq!(
            s.prev_pid,
            Field {
                offset: 24,
                size: 4
            }
        );
        assert_eq!(
            s.prev_state,
            Field {
                offset: 32,
                size: 8
            }
        );
        assert_eq!(
            s.next_pid,
            Field {
                offset: 56,
                size: 4
            }
        );
        assert!(field(FORMAT_6_18, "prev_comm").is_some());
        assert!(parse("x", FORMAT_6_18).is_err());
        assert!(parse("1", "format:\n").unwrap_err().contains("prev_pid"));
    }

    #[test]
    fn reads_fields() {
        let mut raw = vec![0u8; 64];
        raw[24..28].copy_from_slice(&4242i32.to_ne_bytes());
        raw[32..40].copy_from_slice(&0x100i64.to_ne_bytes());
        let s = parse("372", FORMAT_6_18).unwrap();
        assert_eq!(s.prev_pid.read(&raw), Some(4242));
        assert_eq!(s.prev_state.read(&raw), Some(0x100));
        assert_eq!(s.prev_pid.read(&raw[..20]), None);
    }
}
