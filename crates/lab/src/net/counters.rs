//! What each end of a repetition records besides its traffic: the kernel's TCP counters in its network
//! namespace (`/proc/thread-self/net/snmp` and `netstat`, parsed by `hostfacts::parse::net_counters`) and
//! its thread's CPU time and context switches.

use std::collections::BTreeMap;

use results::net::EndUse;

/// The TCP counters recorded around each cell: (file, section, field).
pub const COUNTERS: [(&str, &str, &str); 9] = [
    ("snmp", "Tcp", "RetransSegs"),
    ("snmp", "Tcp", "OutSegs"),
    ("netstat", "TcpExt", "TCPFastRetrans"),
    ("netstat", "TcpExt", "TCPSackRecovery"),
    ("netstat", "TcpExt", "TCPDSACKRecv"),
    ("netstat", "TcpExt", "TCPDSACKOfoRecv"),
    ("netstat", "TcpExt", "TCPLostRetransmit"),
    ("netstat", "TcpExt", "TCPTimeouts"),
    ("netstat", "TcpExt", "TCPSACKReorder"),
];

/// Reads the recorded counters in the calling thread's network namespace.
pub(super) fn read_counters() -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    let snmp = hostfacts::parse::net_counters(
        &std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap_or_default(),
    );
    let netstat = hostfacts::parse::net_counters(
        &std::fs::read_to_string("/proc/thread-self/net/netstat").unwrap_or_default(),
    );
    for (file, sec, name) in COUNTERS {
        let src = if file == "snmp" { &snmp } else { &netstat };
        if let Some(v) = src.get(sec).and_then(|m| m.get(name)) {
            out.insert(name.to_string(), *v);
        }
    }
    out
}

pub(super) fn delta(a: &BTreeMap<String, i64>, b: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    b.iter()
        .map(|(k, v)| (k.clone(), v - a.get(k).copied().unwrap_or(0)))
        .collect()
}

pub(super) fn thread_use() -> EndUse {
    let u = hostfacts::rusage::Usage::now(hostfacts::rusage::Who::Thread);
    EndUse {
        user_s: u.user_ns as f64 / 1e9,
        sys_s: u.sys_ns as f64 / 1e9,
        nvcsw: u.nvcsw,
        nivcsw: u.nivcsw,
    }
}

pub(super) fn use_delta(a: &EndUse, b: &EndUse) -> EndUse {
    EndUse {
        user_s: b.user_s - a.user_s,
        sys_s: b.sys_s - a.sys_s,
        nvcsw: b.nvcsw - a.nvcsw,
        nivcsw: b.nivcsw - a.nivcsw,
    }
}

pub(super) fn add_use(a: &mut EndUse, b: &EndUse) {
    a.user_s += b.user_s;
    a.sys_s += b.sys_s;
    a.nvcsw += b.nvcsw;
    a.nivcsw += b.nivcsw;
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_recorded_counters_are_read_live() {
        let live = super::read_counters();
        assert!(
            live.contains_key("RetransSegs") && live.contains_key("TCPFastRetrans"),
            "{live:?}"
        );
    }
}
