//! `preemptlab vm`: another kernel, in a VM (the work is in the `vm` crate).

use std::io::Write;

use anyhow::{anyhow, Result};
use vm::cli::VmArgs;

pub fn run(args: VmArgs) -> Result<i32> {
    let vm_error = |e: vm::VmError| anyhow!(e.render(flag));
    if args.list {
        for line in vm::kernels::list().map_err(vm_error)? {
            crate::term::stdout(format!("{line}\n"))?;
        }
        return Ok(0);
    }
    let opts = args
        .options(|kind| lab::result::default_path(kind, lab::result::unix_now()))
        .map_err(vm_error)?;
    let out = vm::run::run(&opts).map_err(vm_error)?;
    // One line about the VM, unless the guest command failed: then its own one-line error stands alone.
    if out.status != 2 {
        osutil::msg!("preemptlab vm: {}", out.block.summary());
        if let Some(warning) = out.block.busy_warning() {
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
