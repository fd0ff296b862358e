//! `Key: value` files: /proc/meminfo, /proc/PID/status, /proc/PID/smaps_rollup (proc(5)).

use std::collections::BTreeMap;

/// Parses `Key:   123 kB` lines (meminfo, status, smaps_rollup) into a map of key -> value in kB (or the bare
/// number for unitless keys such as `HugePages_Total`). Lines that are not of that shape are skipped.
pub fn kv_kib(text: &str) -> BTreeMap<String, u64> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let Some(num) = words.next().and_then(|w| w.parse::<u64>().ok()) else {
            continue;
        };
        map.insert(key.trim().to_string(), num);
    }
    map
}

/// Parses `Key:\tvalue` lines into a map of strings (e.g. `/proc/PID/status` for `PPid` and `Name`).
pub fn kv_text(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_kib_reads_meminfo_and_unitless() {
        let m = kv_kib("MemTotal:       24684084 kB\nHugePages_Total:       0\nHugepagesize:       2048 kB\nbogus\n");
        assert_eq!(m["MemTotal"], 24684084);
        assert_eq!(m["HugePages_Total"], 0);
        assert_eq!(m["Hugepagesize"], 2048);
        assert_eq!(m.len(), 3);
    }
}
