//! Which of the three perf events a diagnosis opens (`--events`): an operator can leave out the one a
//! host cannot afford, and a measurement of diagnose's cost can take each event alone.

use std::fmt;
use std::str::FromStr;

/// The events opened; at least one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventSet {
    /// On-CPU samples (`cpu-clock`): where the CPU goes, the spinlock share.
    pub cpu: bool,
    /// Minor-fault samples with addresses (`page-faults-min`): faults on the shared segment.
    pub faults: bool,
    /// Switches out while runnable (`sched:sched_switch`): preemptions inside page faults.
    pub switches: bool,
}

impl EventSet {
    /// Every event (the default).
    pub const ALL: EventSet = EventSet {
        cpu: true,
        faults: true,
        switches: true,
    };

    /// The names on the command line, in the order `--help` lists them.
    pub const NAMES: [&'static str; 3] = ["cpu", "faults", "switches"];

    /// The names of the events in the set, in [`Self::NAMES`] order.
    pub fn names(self) -> Vec<&'static str> {
        let on = [self.cpu, self.faults, self.switches];
        Self::NAMES
            .iter()
            .zip(on)
            .filter(|(_, on)| *on)
            .map(|(n, _)| *n)
            .collect()
    }
}

impl Default for EventSet {
    fn default() -> Self {
        Self::ALL
    }
}

impl fmt::Display for EventSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.names().join(","))
    }
}

impl FromStr for EventSet {
    type Err = String;

    /// A comma-separated list of [`EventSet::NAMES`], or `all`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut set = EventSet {
            cpu: false,
            faults: false,
            switches: false,
        };
        for part in text.split(',').map(str::trim) {
            match part {
                "all" => set = Self::ALL,
                "cpu" => set.cpu = true,
                "faults" => set.faults = true,
                "switches" => set.switches = true,
                other => {
                    return Err(format!(
                        "{other:?}: not an event; give a comma-separated list of cpu, faults, switches (or all)"
                    ))
                }
            }
        }
        if set.names().is_empty() {
            return Err(
                "no event given; give a comma-separated list of cpu, faults, switches (or all)"
                    .into(),
            );
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_refuses_the_rest() {
        assert_eq!("all".parse::<EventSet>(), Ok(EventSet::ALL));
        let two: EventSet = "switches, cpu".parse().unwrap();
        assert_eq!(two.names(), ["cpu", "switches"]);
        assert_eq!(two.to_string(), "cpu,switches");
        assert!(!two.faults);
        assert!("cpu,fault"
            .parse::<EventSet>()
            .unwrap_err()
            .contains("\"fault\""));
        assert!("".parse::<EventSet>().is_err());
        assert!(",".parse::<EventSet>().is_err());
        assert_eq!(
            EventSet::ALL.to_string().parse::<EventSet>(),
            Ok(EventSet::ALL)
        );
    }
}
