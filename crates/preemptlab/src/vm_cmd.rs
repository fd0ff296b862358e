//! `preemptlab vm`: another kernel, in a VM (the work is in the `vm` crate). The guest command is checked
//! here first (`guest_cmd`), so that a bad one is refused before anything boots.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{anyhow, Result};
use vm::cli::VmArgs;
use vm::VmError;

use crate::guest_cmd;

pub fn run(args: VmArgs) -> Result<i32> {
    // From the start: a stop signal at any moment ends the run through its cleanup and 128 + the signal.
    osutil::stop::install_signal_flag()?;
    let vm_error = |e: VmError| anyhow!(e.render(flag));
    if args.list {
        for line in vm::kernels::list(args.arch().map_err(vm_error)?).map_err(vm_error)? {
            crate::term::stdout(format!("{line}\n"))?;
        }
        return Ok(0);
    }
    let opts = args
        .options(|kind| hostfacts::envelope::default_path(kind, osutil::unix_now()))
        .map_err(vm_error)?;
    let size = vm::run::check(&opts).map_err(vm_error)?;
    // The result file the host writes: the command's --out, else its default path.
    let out = vm::guest::find_out_arg(&opts.command)
        .map(|(_, p, _)| PathBuf::from(p))
        .or_else(|| opts.default_out.clone());
    let guest = guest_cmd::guest_shape(size.cpus, size.memory_mib);
    guest_cmd::check(&opts.command, &guest, out.as_deref())?;
    let out = match vm::run::run(&opts, &mut |line| osutil::msg!("preemptlab vm: {line}")) {
        Err(VmError::Interrupted) => {
            osutil::msg!("preemptlab vm: {}", VmError::Interrupted.render(flag));
            return Ok(osutil::stop::interrupted_exit_code());
        }
        r => r.map_err(vm_error)?,
    };
    // One line about the VM, unless the guest command failed: then its own one-line error stands alone.
    if out.status != 2 {
        osutil::msg!("preemptlab vm: {}", out.block.summary());
        for warning in out.block.warnings() {
            osutil::msg!("preemptlab vm: {warning}");
        }
    }
    // A closed stderr drops the guest's messages, never its exit code.
    let _ = std::io::stderr().write_all(&out.stderr);
    crate::term::stdout(&out.stdout)?;
    if let Some(f) = &out.out_file {
        osutil::msg!("preemptlab vm: wrote {} (with the vm block)", f.display());
    }
    Ok(out.status)
}

/// `vm`'s options as flags; the kernels' `list` as the command that shows it, the guest `command` where it goes.
fn flag(option: &str) -> String {
    match option {
        "list" => "preemptlab vm --list".into(),
        "command" => "after --, e.g. preemptlab vm --kernel 6.18 -- audit".into(),
        o => crate::term::flag(o),
    }
}
