//! `preemptlab bench pg`.

use std::io::IsTerminal;

use anyhow::{anyhow, bail, Result};
use lab::lockrun::{self, Status};
use lab::pgrun::{self, RunOptions, Spec};

use crate::cli::{BenchPgArgs, Driver, Pooler, Protocol, PssWhen};

fn whole_seconds(flag: &str, s: &str, min: u64) -> Result<u64> {
    let d = lockrun::parse_duration(s).map_err(|e| anyhow!("{flag}: {e}"))?;
    let secs = d.as_secs_f64();
    if secs.fract() != 0.0 {
        bail!("{flag} {s}: pgbench and sysbench count whole seconds (e.g. 10s, 1m)");
    }
    if (secs as u64) < min {
        bail!("{flag} {s}: at least {min}s");
    }
    Ok(secs as u64)
}

pub fn run(a: BenchPgArgs) -> Result<i32> {
    let host = hostfacts::Host::live();
    let mem = hostfacts::audit::memory_facts(&host);
    let cpus = hostfacts::audit::kernel_facts(&host)
        .cpus
        .value
        .unwrap_or(1);
    let list = crate::cli::split_list;
    let (clients_given, clients) =
        lockrun::parse_counts("--clients", "clients", &a.clients, cpus, 5000)
            .map_err(|e| anyhow!(e))?;
    let duration_s = whole_seconds("--duration", &a.duration, 1)?;
    let warmup_s = whole_seconds("--warmup", &a.warmup, 0)?;
    let sample = lockrun::parse_duration(&a.sample_interval)
        .map_err(|e| anyhow!("--sample-interval: {e}"))?;
    if sample.as_secs_f64() < 0.1 {
        bail!("--sample-interval {}: at least 100ms", a.sample_interval);
    }
    let mut settings = Vec::new();
    for s in &a.set {
        let Some((k, v)) = s.split_once('=') else {
            bail!("--set {s}: expected name=value, e.g. --set work_mem=16MB");
        };
        if k.trim().is_empty()
            || !k
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        {
            bail!("--set {s}: {k:?} is not a setting name");
        }
        settings.push((k.trim().to_string(), v.trim().to_string()));
    }
    let driver = match a.driver {
        Driver::Pgbench => "pgbench",
        Driver::Sysbench => "sysbench",
    };
    let script = a.script.clone().unwrap_or_else(|| {
        match a.driver {
            Driver::Pgbench => "select-only",
            Driver::Sysbench => "oltp_point_select",
        }
        .to_string()
    });
    let bin = hostfacts::pgbin::find(a.pg_bin.as_deref(), None).map_err(|e| anyhow!(e))?;
    let huge_page_kib = mem.default_huge_page_kib.value.unwrap_or(2048);
    let mut spec = Spec {
        huge_pages: list(&a.huge_pages),
        shared_buffers: list(&a.shared_buffers),
        clients_given,
        clients,
        scale: a.scale,
        script,
        script_text: None,
        driver: driver.into(),
        pooler: a.pooler.map(|p| match p {
            Pooler::Pgbouncer => "pgbouncer".to_string(),
        }),
        protocol: match a.protocol {
            Protocol::Simple => "simple",
            Protocol::Extended => "extended",
            Protocol::Prepared => "prepared",
        }
        .into(),
        reconnect: a.reconnect,
        prewarm: a.prewarm,
        duration_s,
        warmup_s,
        repeat: a.repeat,
        threads: match a.threads {
            Some(0) => {
                bail!("--threads 0: pgbench needs at least one thread (default: one per CPU)")
            }
            Some(n) => n,
            None => cpus.max(1),
        },
        latency_sample: a.latency_sample,
        settings,
        huge_page_kib,
        pg_bin: bin.dir.display().to_string(),
        pg_version: None,
        sample_interval_s: sample.as_secs_f64(),
        pss: match a.pss {
            PssWhen::End => "end",
            PssWhen::Every => "every",
            PssWhen::Never => "never",
        }
        .into(),
    };
    spec.script_text = pgrun::validate(&spec, mem.total_kib.value).map_err(|e| anyhow!(e))?;
    if spec.huge_pages.iter().any(|h| h != "off")
        && a.reserve_hugepages
        && !hostfacts::host::is_root()
    {
        bail!("--reserve-hugepages resizes the hugetlb pool: run as root, or leave it out and grow the pool yourself");
    }
    let out = a
        .result
        .out
        .clone()
        .unwrap_or_else(|| lab::result::default_path("bench-pg", lab::result::unix_now()));
    crate::term::claim_output(&out)?;
    let tty = std::io::stderr().is_terminal() && !a.result.quiet;
    let bar = tty.then(|| {
        let pb = indicatif::ProgressBar::new(1000);
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "{prefix:>7} [{bar:30}] {elapsed_precise} {msg}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        pb
    });
    let pb = bar.clone();
    let quiet = a.result.quiet;
    let opts = RunOptions {
        reserve_hugepages: a.reserve_hugepages,
        out: out.clone(),
        parent_dir: None,
        progress: Box::new(move |done, total, label, phase, frac, tps| {
            if let Some(pb) = &pb {
                pb.set_prefix(format!("{done}/{total}"));
                // The bar moves through each measured run too, not only between runs.
                let pos = (done as f64 + frac) / total.max(1) as f64;
                pb.set_position((pos.min(1.0) * 1000.0) as u64);
                let live = if tps > 0.0 {
                    format!(" {} tps", report::lock_table::rate(tps))
                } else {
                    String::new()
                };
                pb.set_message(format!("{label} {phase}{live}"));
            }
        }),
        on_rep: Box::new(move |cell, rep| {
            let line = report::pg_table::rep_line(cell, rep);
            match &bar {
                Some(pb) => pb.println(line),
                None if !quiet => eprintln!("{line}"),
                None => {}
            }
        }),
    };
    // Switched back when this function returns, by any path.
    let _preempt = crate::switch::preempt(&a.preempt)?;
    let res = pgrun::run(spec, opts).map_err(|e| anyhow!(e))?;
    let table = |md| {
        if md {
            report::pg_table::markdown(&res)
        } else {
            report::pg_table::render(&res)
        }
    };
    crate::term::print_result(a.result.format, &res, table, &out, a.result.quiet);
    if res.envelope.interrupted {
        eprintln!(
            "preemptlab: interrupted; the runs measured so far are in {} (the cluster is removed)",
            out.display()
        );
        return Ok(lab::guard::interrupted_exit_code());
    }
    let failed: Vec<String> = res
        .cells
        .iter()
        .filter(|c| c.status == Status::Failed)
        .map(|c| {
            format!(
                "sb {} hp {} c {}: {}",
                c.shared_buffers,
                c.huge_pages,
                c.clients,
                c.reason.as_deref().unwrap_or("")
            )
        })
        .collect();
    if !failed.is_empty() {
        bail!("{} cells failed: {}", failed.len(), failed.join("; "));
    }
    Ok(0)
}
