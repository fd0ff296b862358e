//! `preemptlab vm`: another kernel, in a VM (the work is in the `vm` crate).

use std::io::Write;

use anyhow::{anyhow, Result};
use hostfacts::PreemptModel;

use crate::cli::{VmAccel, VmArgs};

pub fn run(args: VmArgs) -> Result<i32> {
    if args.list {
        let paths = vm::kernels::SearchPaths::live();
        let found = vm::kernels::discover(&paths);
        if found.is_empty() {
            return Err(anyhow!(vm::VmError::NoKernels {
                searched: paths.describe()
            }));
        }
        for k in &found {
            println!(
                "{}",
                vm::kernels::list_line(k, &vm::kernels::read_capabilities(k))
            );
        }
        return Ok(0);
    }
    let preempt = match &args.preempt {
        None => None,
        Some(p) => match PreemptModel::parse(p) {
            Some(m) if m != PreemptModel::Rt => Some(m),
            _ => {
                return Err(anyhow!(
                    "--preempt {p}: not a model (use none, voluntary, full or lazy)"
                ))
            }
        },
    };
    let memory = hostfacts::parse::size(&args.memory)
        .map_err(|e| anyhow!("--memory: {} (e.g. 512M, 2G)", e.0))?;
    let boot_timeout = lab::lockrun::parse_duration(&args.boot_timeout)
        .map_err(|e| anyhow!("--boot-timeout: {e}"))?;
    // Commands that write a result file by default: the host writes it where they would have.
    let kind = match args
        .command
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["bench", b, ..] => Some(format!("bench-{b}")),
        ["check", ..] => Some("check".to_string()),
        ["sim", ..] => Some("sim".to_string()),
        _ => None,
    };
    let opts = vm::VmOptions {
        default_out: kind.map(|k| lab::result::default_path(&k, lab::result::unix_now())),
        boot_timeout,
        kernel: args.kernel,
        preempt,
        cpus: args.cpus,
        memory_mib: Some(memory.0 >> 20),
        accel: match args.accel {
            VmAccel::Auto => vm::AccelRequest::Auto,
            VmAccel::Kvm => vm::AccelRequest::Kvm,
            VmAccel::Tcg => vm::AccelRequest::Tcg,
        },
        append: args.append,
        command: args.command,
        exe: std::env::current_exe().map_err(|e| anyhow!("finding this binary: {e}"))?,
    };
    let out = vm::run::run(&opts)?;
    // One line about the VM, unless the guest command failed: then its own one-line error stands alone.
    if out.status != 2 {
        let b = &out.block;
        eprintln!(
            "preemptlab vm: {} ({}: {}), {} vCPUs, {} MiB: booted in {:.1} s, {:.1} s in all",
            b.kernel_release.as_deref().unwrap_or(&b.kernel_image),
            b.accelerator,
            b.accelerator_why,
            b.vcpus,
            b.memory_mib,
            b.boot_s,
            b.wall_s
        );
        if let Some(p) = b.host_other_busy_pct.filter(|p| *p >= 5.0) {
            eprintln!(
                "preemptlab vm: other processes used {p:.0}% of the host's CPU meanwhile: the guest's figures are disturbed; measure on an idle host"
            );
        }
    }
    std::io::stderr().write_all(&out.stderr)?;
    std::io::stdout().write_all(&out.stdout)?;
    if let Some(f) = &out.out_file {
        eprintln!("preemptlab vm: wrote {} (with the vm block)", f.display());
    }
    Ok(out.status)
}
