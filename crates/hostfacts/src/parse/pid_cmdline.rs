//! /proc/PID/cmdline: the arguments, and what a postmaster's give (data directory, port, `-c` settings).

use std::collections::BTreeMap;

/// The arguments of a NUL-separated `/proc/PID/cmdline`. A process that rewrote its title (PostgreSQL
/// backends) shows one argument with spaces.
pub fn cmdline_args(raw: &[u8]) -> Vec<String> {
    raw.split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// `-D dir`, `-p port` and `-c name=value` options of a postmaster command line.
pub fn postmaster_args(args: &[String]) -> (Option<String>, Option<u16>, BTreeMap<String, String>) {
    let mut data_dir = None;
    let mut port = None;
    let mut settings = BTreeMap::new();
    let mut i = 1;
    while i < args.len() {
        let a = args[i].as_str();
        let next = args.get(i + 1).cloned();
        // A flag is one ASCII letter after '-': an argument whose second character is wider is no flag.
        let (flag, inline) =
            if a.len() > 2 && a.starts_with('-') && !a.starts_with("--") && a.is_char_boundary(2) {
                (&a[..2], Some(a[2..].to_string()))
            } else {
                (a, None)
            };
        let mut take = || {
            if inline.is_some() {
                inline.clone()
            } else {
                i += 1;
                next.clone()
            }
        };
        match flag {
            "-D" => data_dir = take(),
            "-p" => port = take().and_then(|p| p.parse().ok()),
            "-c" => {
                if let Some(kv) = take() {
                    if let Some((k, v)) = kv.split_once('=') {
                        settings.insert(
                            k.trim().replace('-', "_").to_ascii_lowercase(),
                            v.trim().to_string(),
                        );
                    }
                }
            }
            _ if a.starts_with("--") => {
                if let Some((k, v)) = a[2..].split_once('=') {
                    settings.insert(k.replace('-', "_").to_ascii_lowercase(), v.to_string());
                }
            }
            _ => {}
        }
        i += 1;
    }
    (data_dir, port, settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postmaster_args_multibyte_after_dash_is_no_flag() {
        // Found by fuzzing (fuzz/corpus/cmdline/crash-postmaster-args-multibyte): slicing "-\u{fffd}..." at
        // byte 2 panicked.
        let args: Vec<String> = [
            "postgres",
            "-\u{fffd}ared_buffers=1GB",
            "-D",
            "/d",
            "-\u{e9}",
            "-p5433",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (dir, port, settings) = postmaster_args(&args);
        assert_eq!(dir.as_deref(), Some("/d"));
        assert_eq!(port, Some(5433));
        assert!(settings.is_empty());
    }

    #[test]
    fn postmaster_command_lines() {
        let args: Vec<String> = [
            "/usr/lib/postgresql/15/bin/postgres",
            "-D",
            "/var/lib/postgresql/15/main",
            "-c",
            "config_file=/etc/postgresql/15/main/postgresql.conf",
            "-p5433",
            "--huge-pages=on",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (d, p, s) = postmaster_args(&args);
        assert_eq!(d.as_deref(), Some("/var/lib/postgresql/15/main"));
        assert_eq!(p, Some(5433));
        assert_eq!(s["config_file"], "/etc/postgresql/15/main/postgresql.conf");
        assert_eq!(s["huge_pages"], "on");
        assert_eq!(
            cmdline_args(b"postgres\0-D\0/x\0"),
            vec!["postgres", "-D", "/x"]
        );
    }
}
