//! /proc/net/snmp and /proc/net/netstat (one format: per section, a line of names, then a line of values).

use std::collections::BTreeMap;

/// Parses the two-line-per-section format of /proc/net/snmp and /proc/net/netstat
/// (`Tcp: names...` then `Tcp: values...`) into section -> name -> value.
pub fn net_counters(text: &str) -> BTreeMap<String, BTreeMap<String, i64>> {
    let mut out: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let (Some((sec, n)), Some((sec2, v))) = (names.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        if sec != sec2 {
            continue;
        }
        let m = out.entry(sec.to_string()).or_default();
        for (k, x) in n.split_whitespace().zip(v.split_whitespace()) {
            if let Ok(x) = x.parse() {
                m.insert(k.to_string(), x);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_parse_the_two_line_sections() {
        let t = "Tcp: RtoAlgorithm RetransSegs OutSegs\nTcp: 1 17 4000\nUdp: InDatagrams\nUdp: 5\n";
        let m = net_counters(t);
        assert_eq!(m["Tcp"]["RetransSegs"], 17);
        assert_eq!(m["Udp"]["InDatagrams"], 5);
    }
}
