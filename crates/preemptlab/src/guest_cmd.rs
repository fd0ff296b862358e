//! `vm`'s guest command, checked on the host before anything boots.
//!
//! The guest runs this same binary, so its command line is this binary's own: it is parsed with the same
//! clap definition, and its options are checked by the same functions the command itself calls first,
//! against the guest's shape (its vCPUs and memory, root) instead of this host's. A typo, a value out of
//! range, an unwritable result path is refused in milliseconds, where it used to cost a boot (tens of
//! seconds under TCG) and fail inside the guest. What only the guest can know (its debugfs, its huge
//! page pool) is still found out there.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use clap::Parser;
use lab::options::HostShape;

use crate::cli::{BenchCommand, Cli, Command};
use crate::term;

/// The guest's shape as the options see it: `cpus` vCPUs, `memory_mib` of memory, root.
pub fn guest_shape(cpus: u32, memory_mib: u64) -> HostShape {
    HostShape {
        cpus,
        mem_total_kib: Some(memory_mib * 1024),
        huge_page_kib: 2048,
        root: true,
    }
}

/// Checks `command` (the words after `vm ... --`) as the guest would, and the result file the host will
/// write for it (`out`: its `--out`, or the default path of a command that writes one). An empty command
/// and a nested `vm` are left to `vm::run`, which refuses them in its own words.
pub fn check(command: &[String], guest: &HostShape, out: Option<&Path>) -> Result<()> {
    if command.first().is_none_or(|c| c == "vm") {
        return Ok(());
    }
    let said = |e: anyhow::Error| anyhow!("the guest command: {e:#}");
    let argv = std::iter::once("preemptlab".to_string()).chain(command.iter().cloned());
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        // `vm -- bench lock --help` prints the guest's help: nothing to refuse.
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) =>
        {
            return Ok(())
        }
        Err(e) => bail!("the guest command: {}", crate::usage_line(&e)),
    };
    let inputs = options(&cli.command, guest).map_err(said)?;
    if let Some(out) = out {
        osutil::output::check_not_input(out, &inputs).map_err(|e| said(anyhow!("--out {e}")))?;
        osutil::output::check_writable(out).map_err(|e| said(term::out_flag(e)))?;
    }
    Ok(())
}

/// Checks a command's options as the command does before it starts its work; returns the files it reads
/// (which its result must not overwrite).
fn options(command: &Command, guest: &HostShape) -> Result<Vec<PathBuf>> {
    let mut inputs = Vec::new();
    match command {
        Command::Bench(BenchCommand::Lock(b)) => {
            b.opts.spec(guest).map_err(term::flags)?;
            crate::switch::check(&b.preempt)?;
        }
        Command::Bench(BenchCommand::Pg(b)) => {
            b.opts.spec(guest).map_err(term::flags)?;
            crate::switch::check(&b.preempt)?;
            inputs.extend(b.opts.script.iter().map(PathBuf::from));
        }
        Command::Bench(BenchCommand::Latency(b)) => {
            b.opts.spec(guest).map_err(term::flags)?;
            crate::switch::check(&b.preempt)?;
        }
        Command::Bench(BenchCommand::Net(b)) => {
            b.opts.spec(guest).map_err(term::flags)?;
            crate::switch::check(&b.preempt)?;
        }
        Command::Sim(s) => {
            s.opts
                .plan()
                .map_err(|e| anyhow!(e.render(term::flag)))?;
            inputs.extend(s.opts.like.iter().chain(&s.opts.costs_from).cloned());
        }
        Command::Check(c) if c.report.is_some() => bail!(
            "--report: the guest's own files do not come back to the host; drop it and run `preemptlab report RESULT.json -o PAGE.html` on the result afterwards"
        ),
        Command::Audit(a) => {
            if let Some(dir) = &a.sysroot.sysroot {
                hostfacts::Host::at_checked(dir).map_err(|e| anyhow!("--sysroot {e}"))?;
            }
        }
        Command::Diagnose(d) => {
            crate::diagnose_cmd::options(d)?;
        }
        Command::Hugepages(h) => {
            if let Some(p) = &h.page_size {
                hostfacts::targets::page_size_kib(p).map_err(|e| anyhow!("--page-size {e}"))?;
            }
            if let Some(s) = &h.shared_memory {
                results::host::bytes::size(s).map_err(|e| anyhow!("--shared-memory {}", e.0))?;
            }
        }
        Command::Fleet(f) => {
            hostfacts::fleet::parse_age(&f.stale_after)
                .map_err(|e| anyhow!("--stale-after {e}"))?;
        }
        Command::Report(r) => inputs.extend(r.inputs.iter().cloned()),
        _ => {}
    }
    Ok(inputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    /// Regression (issue 29): these booted a VM and failed after the boot.
    #[test]
    fn bad_guest_commands_are_refused_on_the_host() {
        let g = guest_shape(2, 2048);
        for (cmd, want) in [
            ("frobnicate", "unrecognized subcommand 'frobnicate'"),
            ("ls /", "unrecognized subcommand 'ls'"),
            ("audit --frobnicate", "--frobnicate"),
            ("bench lock --pages hugetlb-9m", "hugetlb-9m"),
            ("bench lock --switch-preempt sometimes", "sometimes"),
            ("sim --set cpus=0", "cpus"),
            ("check --report r.html", "--report"),
            ("diagnose --duration 0s", "--duration"),
            ("hugepages --page-size 3MB", "3MB"),
        ] {
            let e = check(&words(cmd), &g, None).unwrap_err().to_string();
            assert!(e.starts_with("the guest command: "), "{cmd}: {e}");
            assert!(e.contains(want), "{cmd}: {e}");
            assert_eq!(e.lines().count(), 1, "{cmd}: {e}");
        }
        let e = check(
            &words("bench lock --out /proc/foo/x.json"),
            &g,
            Some(Path::new("/proc/foo/x.json")),
        )
        .unwrap_err();
        assert!(e.to_string().contains("cannot create /proc/foo"), "{e}");
        // The guest's shape, not this host's: 4x of 2 vCPUs is 8 workers, fine.
        check(&words("bench lock --workers 4x"), &g, None).unwrap();
        check(&words("audit"), &g, None).unwrap();
        check(&words("bench lock --help"), &g, None).unwrap();
        check(&[], &g, None).unwrap();
    }
}
