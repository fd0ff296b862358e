//! `preemptlab generate man|completions DIR` (hidden): the man pages and shell completions, generated from
//! the same clap definition the binary parses with, so they cannot drift from it. `scripts/package` runs it
//! before building the Debian package.

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::{Cli, GenerateArgs, GenerateWhat};

pub fn run(args: GenerateArgs) -> Result<i32> {
    let dir = &args.dir;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating {} (give a writable directory)", dir.display()))?;
    match args.what {
        // One page per visible command: preemptlab.1, preemptlab-audit.1, preemptlab-bench-lock.1, ...
        GenerateWhat::Man => clap_mangen::generate_to(Cli::command(), dir)
            .with_context(|| format!("writing man pages into {}", dir.display()))?,
        GenerateWhat::Completions => {
            for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
                let mut cmd = Cli::command();
                clap_complete::generate_to(shell, &mut cmd, "preemptlab", dir).with_context(
                    || format!("writing the {shell} completion into {}", dir.display()),
                )?;
            }
        }
    }
    Ok(0)
}
