//! The preemption model a WARN, BUG or oops header in the kernel log names (Linux 6.15+).
//!
//! Since 6.15 (commit d167706f68ee, "lib/dump_stack: Use preempt_model_str()") `dump_stack_print_info`
//! ends its header line with the running model: `CPU: 1 UID: 0 PID: 122 Comm: sh Not tainted
//! 7.2.13+deb14-amd64 #1 PREEMPT(lazy)`, the word after the first word of `uname -v` (`#1`). The word is
//! `preempt_model_str()` of kernel/sched/core.c: `PREEMPT` when the kernel is built preemptible
//! (CONFIG_PREEMPT_BUILD), then `_RT` (`_{RT,` with a dynamic or lazy kernel), then `(mode)` on a
//! PREEMPT_DYNAMIC kernel (the mode at that moment) or `LAZY` on a lazy one; `VOLUNTARY` or `NONE` otherwise.
//! 6.15 and 6.16 printed `PREEMPT(undef)` for `none` (commit 3ebb1b652239 fixed an off-by-one), as every
//! kernel does before the mode is set at boot. Headers before 6.15 end at `#1`; `uname -v` prints plain
//! `PREEMPT` for full and lazy alike (init/Makefile has no flag for lazy), and this header tells them apart.
//!
//! Seen here (2026-11-29, `echo l > /proc/sysrq-trigger` in virtme-ng guests of Debian's kernels):
//! `... 7.2.13+deb14-amd64 #1 PREEMPT(lazy)  Debian 7.2.13-1` and, booted `preempt=none`,
//! `... 6.18.15+deb13-amd64 #1 PREEMPT(none)  Debian 6.18.15-1~bpo13+1`.

use super::PreemptModel;

/// The last header of the latest boot in `log` that names a model: the line (from `CPU: `) and the word.
pub fn last_header(log: &str) -> Option<(String, String)> {
    crate::parse::latest_boot(log).lines().rev().find_map(|l| {
        let line = &l[l.find("CPU: ")?..];
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.get(2) != Some(&"UID:") || !words.contains(&"Comm:") {
            return None;
        }
        // The model is the word after `uname -v`'s first word (`#1`); searched from the end, since the
        // command name before it may hold spaces.
        (1..words.len())
            .rev()
            .find(|&i| words[i - 1].starts_with('#') && is_model_word(words[i]))
            .map(|i| (line.trim_end().to_string(), words[i].to_string()))
    })
}

fn is_model_word(w: &str) -> bool {
    w.starts_with("PREEMPT") || w == "VOLUNTARY" || w == "NONE"
}

/// The model `word` names, or why it names none.
pub fn model_of(word: &str) -> Result<PreemptModel, String> {
    if word.starts_with("PREEMPT_RT") || word.starts_with("PREEMPT_{RT") {
        return Ok(PreemptModel::Rt);
    }
    match word {
        "PREEMPT" => return Ok(PreemptModel::Full),
        "PREEMPTLAZY" => return Ok(PreemptModel::Lazy),
        "VOLUNTARY" => return Ok(PreemptModel::Voluntary),
        "NONE" => return Ok(PreemptModel::None),
        _ => {}
    }
    match word
        .strip_prefix("PREEMPT(")
        .and_then(|w| w.strip_suffix(')'))
    {
        Some("undef") => Err(
            "PREEMPT(undef): 6.15 and 6.16 print it for none (fixed by 3ebb1b652239), and any kernel before its mode is set at boot"
                .into(),
        ),
        Some(m) => PreemptModel::parse(m)
            .filter(|m| *m != PreemptModel::Rt)
            .ok_or_else(|| format!("not a mode this audit knows ({word})")),
        None => Err(format!("not a model word this audit knows ({word})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines seen in the guests (module doc), raw /dev/kmsg and journal records, and the words
    /// preempt_model_str() makes for each kind of build.
    #[test]
    fn headers_of_real_guests_and_every_model_word() {
        let log = "\
[    0.000000] Linux version 7.2.13+deb14-amd64 (debian-kernel@lists.debian.org)\n\
[    0.000000] Dynamic Preempt: lazy\n\
[   38.254839] CPU: 1 UID: 0 PID: 122 Comm: sh Not tainted 7.2.13+deb14-amd64 #1 PREEMPT(lazy)  Debian 7.2.13-1 \n\
[   38.254841] Hardware name: QEMU Standard PC (i440FX + PIIX, 1996), BIOS 1.16.3-debian-1.16.3-2 04/01/2014\n";
        let (line, word) = last_header(log).unwrap();
        assert!(
            line.starts_with("CPU: 1 UID: 0 PID: 122 Comm: sh"),
            "{line}"
        );
        assert_eq!(word, "PREEMPT(lazy)");
        let none = "6,812,33066802,-;CPU: 1 UID: 0 PID: 151 Comm: sh Not tainted 6.18.15+deb13-amd64 #1 PREEMPT(none)  Debian 6.18.15-1~bpo13+1 \n";
        assert_eq!(last_header(none).unwrap().1, "PREEMPT(none)");
        // A command name with spaces and a tainted kernel; a build ID after the word.
        let odd = "MESSAGE=CPU: 3 UID: 0 PID: 9 Comm: kworker/3:1 #x y Tainted: G        W          6.15.0 #7 PREEMPTLAZY 0123abcd\n";
        assert_eq!(last_header(odd).unwrap().1, "PREEMPTLAZY");
        // Before 6.15 the header ends at `#1`; an earlier boot's header is not this boot's.
        let old = "CPU: 0 PID: 1 Comm: swapper/0 Not tainted 6.1.0 #1\n";
        assert_eq!(last_header(old), None);
        let earlier = format!("{none}Linux version 6.18.15\nDynamic Preempt: full\n");
        assert_eq!(last_header(&earlier), None);
        for (w, m) in [
            ("PREEMPT(none)", PreemptModel::None),
            ("PREEMPT(voluntary)", PreemptModel::Voluntary),
            ("PREEMPT(full)", PreemptModel::Full),
            ("PREEMPT(lazy)", PreemptModel::Lazy),
            ("PREEMPT", PreemptModel::Full),
            ("PREEMPTLAZY", PreemptModel::Lazy),
            ("PREEMPT_RT", PreemptModel::Rt),
            ("PREEMPT_{RT,(full)}", PreemptModel::Rt),
            ("PREEMPT_{RT,LAZY}", PreemptModel::Rt),
            ("VOLUNTARY", PreemptModel::Voluntary),
            ("NONE", PreemptModel::None),
        ] {
            assert_eq!(model_of(w), Ok(m), "{w}");
        }
        assert!(model_of("PREEMPT(undef)").unwrap_err().contains("for none"));
        assert!(model_of("PREEMPT(fast)").is_err());
    }
}
