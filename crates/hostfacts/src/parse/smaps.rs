//! /proc/PID/smaps: one entry per mapping, its header line and its `Key: N kB` fields (proc_pid_smaps(5)).

use std::collections::BTreeMap;

/// One mapping of `/proc/PID/smaps`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SmapsMapping {
    /// Start address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// Permissions such as `rw-s` (`s` = shared).
    pub perms: String,
    /// Offset into the mapped file (the third column): what turns an address into a file offset.
    pub offset: u64,
    /// The mapped file's inode (the fifth column; 0 for anonymous memory): what tells whether the file
    /// now at `path` is the one mapped.
    pub inode: u64,
    /// Path or pseudo-path (`/dev/zero (deleted)`, `/anon_hugepage (deleted)`, `/SYSV00000000 (deleted)`).
    pub path: String,
    /// The `Key: N kB` fields of the mapping.
    pub fields: BTreeMap<String, u64>,
}

impl SmapsMapping {
    /// A field in kB, 0 when absent.
    pub fn kib(&self, key: &str) -> u64 {
        self.fields.get(key).copied().unwrap_or(0)
    }
    /// True for a MAP_SHARED mapping.
    pub fn is_shared(&self) -> bool {
        self.perms.ends_with('s')
    }
}

/// Parses `/proc/PID/smaps` (or `/proc/PID/maps`, the same headers without the fields) into its mappings.
pub fn smaps(text: &str) -> Vec<SmapsMapping> {
    let mut out: Vec<SmapsMapping> = Vec::new();
    for line in text.lines() {
        if let Some(m) = smaps_header(line) {
            out.push(m);
        } else if let Some(cur) = out.last_mut() {
            if let Some((key, rest)) = line.split_once(':') {
                if let Some(n) = rest
                    .split_whitespace()
                    .next()
                    .and_then(|w| w.parse::<u64>().ok())
                {
                    cur.fields.insert(key.trim().to_string(), n);
                }
            }
        }
    }
    out
}

fn smaps_header(line: &str) -> Option<SmapsMapping> {
    let mut parts = line.splitn(6, ' ');
    let range = parts.next()?;
    let (a, b) = range.split_once('-')?;
    let start = u64::from_str_radix(a, 16).ok()?;
    let end = u64::from_str_radix(b, 16).ok()?;
    let perms = parts.next()?.to_string();
    if perms.len() != 4 {
        return None;
    }
    let offset = u64::from_str_radix(parts.next()?, 16).ok()?;
    let _dev = parts.next()?;
    let inode = parts.next()?.parse().ok()?;
    let path = parts.next().unwrap_or("").trim().to_string();
    Some(SmapsMapping {
        start,
        end,
        perms,
        offset,
        inode,
        path,
        fields: BTreeMap::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smaps_finds_mappings_and_fields() {
        let text = "7f0000000000-7f0010000000 rw-s 00000000 00:01 1234  /anon_hugepage (deleted)\nSize:             262144 kB\nKernelPageSize:     2048 kB\nShared_Hugetlb:    10240 kB\nVmFlags: rd wr sh mr mw me ms de ht sd\n55d0-55e0 r--p 00000000 fd:00 42 /usr/lib/postgresql/15/bin/postgres\nSize: 4 kB\nKernelPageSize: 4 kB\n";
        let maps = smaps(text);
        assert_eq!(maps.len(), 2);
        assert_eq!(maps[0].path, "/anon_hugepage (deleted)");
        assert!(maps[0].is_shared());
        assert_eq!(maps[0].kib("KernelPageSize"), 2048);
        assert_eq!(maps[0].kib("Shared_Hugetlb"), 10240);
        assert_eq!(maps[1].kib("Size"), 4);
        assert!(!maps[1].is_shared());
    }
}
