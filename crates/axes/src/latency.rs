//! `bench latency`'s axes: the measuring threads' scheduling policy and the background load.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

names! {
    /// The measuring threads' scheduling policy.
    pub enum Policy {
        /// SCHED_OTHER: the fair class, the one lazy preemption delays.
        Other = "other",
        /// SCHED_FIFO (root): real-time, never lazy.
        Fifo = "fifo",
    }
}

/// A background load the latency is measured under.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Load {
    /// Idle (`none`).
    Idle,
    /// This tool's own `bench lock`: pg on 4 KB pages, 4x CPUs workers (`lock`).
    Lock,
    /// `hackbench` (rt-tests) in a loop (`hackbench`).
    Hackbench,
    /// A shell command, run with `sh -c` (any other text).
    Command(String),
}

impl Load {
    /// The load keywords; any other text is a command.
    pub const KEYWORDS: [&'static str; 3] = ["none", "lock", "hackbench"];

    /// The load a text names: a keyword, or else a command.
    pub fn parse(s: &str) -> Load {
        match s {
            "none" => Load::Idle,
            "lock" => Load::Lock,
            "hackbench" => Load::Hackbench,
            cmd => Load::Command(cmd.to_string()),
        }
    }

    /// The load as given: its keyword, or the command.
    pub fn name(&self) -> &str {
        match self {
            Load::Idle => "none",
            Load::Lock => "lock",
            Load::Hackbench => "hackbench",
            Load::Command(c) => c,
        }
    }
}

impl fmt::Display for Load {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl Serialize for Load {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Load {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Load::parse(&String::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_are_keywords_or_commands() {
        for s in ["none", "lock", "hackbench", "stress-ng --cpu 2"] {
            let l = Load::parse(s);
            assert_eq!(l.name(), s);
            assert_eq!(serde_json::to_string(&l).unwrap(), format!("\"{s}\""));
        }
        assert_eq!(Load::parse("none"), Load::Idle);
        assert_eq!(Policy::from_name("fifo"), Some(Policy::Fifo));
        assert_eq!(Policy::expected(), "other or fifo");
    }
}
