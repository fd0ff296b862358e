//! Inter-processor interrupts of the whole machine from /proc/interrupts: [`Ipis::parse`] (text in, typed
//! value out) and [`now`], its reader. The rows are found by their description, which every architecture
//! that has them prints the same way (x86: `RES:`, `CAL:`, `TLB:`; arm64: `IPI0:`, `IPI1:`), summed over
//! the CPU columns.
//!
//! Why a benchmark counts them: a wakeup that should preempt a task running on another CPU sends that CPU a
//! rescheduling interrupt under `none`, `voluntary` and `full`, and only sets the lazy flag under `lazy`
//! (kernel/sched/core.c, `resched_curr` and `resched_curr_lazy`), so their count per operation shows a
//! preemption model at work in a run.

/// The machine's IPI counters summed over its CPUs: one reading, or the counts between two ([`Ipis::since`]);
/// a row the kernel does not print is None.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ipis {
    /// "Rescheduling interrupts".
    pub resched: Option<u64>,
    /// "Function call interrupts".
    pub call: Option<u64>,
    /// "TLB shootdowns" (x86; arm64 invalidates by broadcast instructions instead).
    pub tlb: Option<u64>,
}

impl Ipis {
    /// Parses /proc/interrupts: for each row whose description is one of the three, the sum of its
    /// counts (the numbers after the row's name, up to the description). A sum that overflows is no
    /// reading for that row.
    pub fn parse(text: &str) -> Self {
        let mut out = Self::default();
        for line in text.lines() {
            let Some((_, rest)) = line.split_once(':') else {
                continue;
            };
            let mut sum = Some(0u64);
            let mut words = rest.split_whitespace().peekable();
            while let Some(n) = words.peek().and_then(|w| w.parse::<u64>().ok()) {
                sum = sum.and_then(|s| s.checked_add(n));
                words.next();
            }
            let desc = words.collect::<Vec<_>>().join(" ");
            let slot = match desc.as_str() {
                "Rescheduling interrupts" => &mut out.resched,
                "Function call interrupts" => &mut out.call,
                "TLB shootdowns" => &mut out.tlb,
                _ => continue,
            };
            if slot.is_none() {
                *slot = sum;
            }
        }
        out
    }

    /// The counts from this reading to `later`, each None where either reading lacks it or it went back.
    pub fn since(self, later: Self) -> Self {
        let d = |a: Option<u64>, b: Option<u64>| b?.checked_sub(a?);
        Self {
            resched: d(self.resched, later.resched),
            call: d(self.call, later.call),
            tlb: d(self.tlb, later.tlb),
        }
    }
}

/// Reads /proc/interrupts; None where it cannot be read.
pub fn now() -> Option<Ipis> {
    Some(Ipis::parse(
        &std::fs::read_to_string("/proc/interrupts").ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x86_rows_are_summed_over_the_cpus() {
        let text = "           CPU0       CPU1       \n  0:         33          0   IO-APIC    2-edge      timer\n\
                    NMI:          0          0   Non-maskable interrupts\n\
                    RES:    9379535    9451033   Rescheduling interrupts\n\
                    CAL:   12210463   12452203   Function call interrupts\n\
                    TLB:    1099863    1056564   TLB shootdowns\n\
                    ERR:          0\n";
        let i = Ipis::parse(text);
        assert_eq!(i.resched, Some(9379535 + 9451033));
        assert_eq!(i.call, Some(12210463 + 12452203));
        assert_eq!(i.tlb, Some(1099863 + 1056564));
    }

    #[test]
    fn arm64_rows_are_found_by_their_description() {
        let text = "           CPU0       CPU1\n\
                    IPI0:       120         80       Rescheduling interrupts\n\
                    IPI1:        7          9       Function call interrupts\n\
                    IPI2:        0          0       CPU stop interrupts\n";
        let i = Ipis::parse(text);
        assert_eq!((i.resched, i.call, i.tlb), (Some(200), Some(16), None));
        let later = Ipis::parse(&text.replace("120", "150"));
        assert_eq!(
            i.since(later),
            Ipis {
                resched: Some(30),
                call: Some(0),
                tlb: None
            }
        );
        // A counter that went back (another boot's reading) is no count.
        assert_eq!(later.since(i).resched, None);
    }

    #[test]
    fn an_overflowing_row_is_no_reading_and_junk_is_nothing() {
        let max = u64::MAX;
        let i = Ipis::parse(&format!("RES: {max} 1 Rescheduling interrupts\n"));
        assert_eq!(i.resched, None);
        assert_eq!(
            Ipis::parse("garbage\n:\n::: Rescheduling\n"),
            Ipis::default()
        );
    }

    #[test]
    fn this_machine_has_them() {
        let i = now().expect("/proc/interrupts readable");
        if cfg!(target_arch = "x86_64") || cfg!(target_arch = "aarch64") {
            assert!(i.resched.is_some() && i.call.is_some(), "{i:?}");
        }
    }
}
