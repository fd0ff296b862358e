//! preemptlab: find, reproduce, measure and fix lock-holder preemption on Linux hosts running PostgreSQL.
//!
//! This file parses the command line and dispatches; the work lives in the library crates.

mod audit_cmd;
mod bench_latency_cmd;
mod bench_lock_cmd;
mod bench_net_cmd;
mod bench_pg_cmd;
mod check_cmd;
mod cli;
mod compare_cmd;
mod diagnose_cmd;
mod fleet_cmd;
mod generate_cmd;
mod guest_cmd;
mod hugepages_cmd;
mod sim_cmd;
mod switch;
mod term;
mod vm_cmd;

use clap::Parser;

/// An error that carries its exit code: 2 for usage and runtime errors.
fn fail(err: anyhow::Error) -> ! {
    osutil::msg!("preemptlab: {err:#}");
    std::process::exit(2)
}

/// A command-line error as one line: clap's message without its `error:` prefix, usage block and help hint,
/// the rest (possible values, tips) joined with `; ` (with a space after a colon).
fn usage_line(e: &clap::Error) -> String {
    e.render()
        .to_string()
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information")
        })
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .fold(String::new(), |acc, l| match acc.chars().last() {
            None => l.to_string(),
            Some(':') => format!("{acc} {l}"),
            Some(_) => format!("{acc}; {l}"),
        })
}

/// `preemptlab bench` without a subcommand: the choices, in one line.
fn missing_subcommand() -> String {
    use clap::CommandFactory;
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut cmd = cli::Cli::command();
    let mut path = Vec::new();
    for w in &words {
        match cmd.find_subcommand(w) {
            Some(sub) => {
                path.push(w.clone());
                cmd = sub.clone();
            }
            None => break,
        }
    }
    let subs: Vec<String> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name().to_string())
        .collect();
    format!(
        "{} needs a subcommand: {} (preemptlab {} --help)",
        path.join(" "),
        subs.join(", "),
        path.join(" ")
    )
}

/// A negative number given to an option (`--workers -5`) reads to clap as an unknown flag (`-5`): say what it
/// is, with the value as given.
fn negative_value(e: &clap::Error) -> Option<String> {
    if e.kind() != clap::error::ErrorKind::UnknownArgument {
        return None;
    }
    let args: Vec<String> = std::env::args().collect();
    let i = args
        .iter()
        .position(|a| a.len() > 1 && a.starts_with('-') && a.as_bytes()[1].is_ascii_digit())?;
    let flag = args
        .get(i.checked_sub(1)?)
        .filter(|f| f.starts_with("--"))?;
    Some(format!(
        "{flag} {}: a negative value; give a positive one (see preemptlab --help)",
        args[i]
    ))
}

fn main() {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        // Help and version go to stdout with exit 0; a bare `preemptlab` prints help (exit 2) as clap does.
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) =>
        {
            e.exit()
        }
        // A bare `preemptlab` prints its help, as clap does; a command missing its subcommand (`bench`)
        // is one line naming the choices.
        Err(e)
            if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                && std::env::args().count() <= 1 =>
        {
            e.exit()
        }
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            osutil::msg!("preemptlab: {}", missing_subcommand());
            std::process::exit(2)
        }
        Err(e) => {
            osutil::msg!(
                "preemptlab: {}",
                negative_value(&e).unwrap_or_else(|| usage_line(&e))
            );
            std::process::exit(2)
        }
    };
    let code = match cli.command {
        cli::Command::Check(c) => check_cmd::run(c),
        cli::Command::Audit(a) => audit_cmd::run(a),
        cli::Command::Diagnose(d) => diagnose_cmd::run(d),
        cli::Command::Hugepages(h) => hugepages_cmd::run(h),
        cli::Command::Bench(cli::BenchCommand::Lock(b)) => bench_lock_cmd::run(b),
        cli::Command::Bench(cli::BenchCommand::Pg(b)) => bench_pg_cmd::run(b),
        cli::Command::Bench(cli::BenchCommand::Latency(b)) => bench_latency_cmd::run(b),
        cli::Command::Bench(cli::BenchCommand::Net(b)) => bench_net_cmd::run(b),
        cli::Command::Compare(c) => compare_cmd::run(c),
        cli::Command::Results(r) => compare_cmd::list(r),
        cli::Command::Report(r) => compare_cmd::report(r),
        cli::Command::Sim(a) => sim_cmd::run(a),
        cli::Command::Fleet(f) => fleet_cmd::run(f),
        cli::Command::Generate(g) => generate_cmd::run(g),
        cli::Command::Vm(v) => vm_cmd::run(v),
    };
    match code {
        Ok(code) => std::process::exit(code),
        Err(e) => fail(e),
    }
}
