//! `bench lock`'s page backings: how its shared region is mapped.

names! {
    /// How the region is backed.
    pub enum Backing {
        /// Plain 4 KB shared memory: first touches fault in each process.
        Page4k = "4k",
        /// 4 KB pages pre-faulted by each worker at start (MADV_POPULATE_WRITE): no faults under the lock,
        /// but every process pays the page tables (docs/references.md#page-table-cost).
        Page4kPopulate = "4k-populate",
        /// Shared-memory THP via MADV_HUGEPAGE (needs /sys/kernel/mm/transparent_hugepage/shmem_enabled
        /// to allow it: anything but `never` or `deny`).
        Thp = "thp",
        /// hugetlb 2 MB pages (MAP_HUGETLB | MAP_HUGE_2MB).
        Hugetlb2m = "hugetlb-2m",
        /// hugetlb 1 GB pages (MAP_HUGETLB | MAP_HUGE_1GB).
        Hugetlb1g = "hugetlb-1g",
    }
}

/// A page backing name that is none of [`Backing::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown page backing {name:?} (choose from {})", Backing::ALL.iter().map(|b| b.name()).collect::<Vec<_>>().join(", "))]
pub struct UnknownBacking {
    /// The name as given.
    pub name: String,
}

impl Backing {
    /// Parses a command-line name.
    pub fn parse(s: &str) -> Result<Backing, UnknownBacking> {
        Backing::from_name(s).ok_or_else(|| UnknownBacking { name: s.into() })
    }

    /// The size the mapping is rounded to, in bytes.
    pub fn page_bytes(self) -> usize {
        match self {
            Backing::Page4k | Backing::Page4kPopulate => 4096,
            Backing::Thp | Backing::Hugetlb2m => 2 << 20,
            Backing::Hugetlb1g => 1 << 30,
        }
    }

    /// The hugetlb page size in kB, for hugetlb backings.
    pub fn hugetlb_kib(self) -> Option<u64> {
        match self {
            Backing::Hugetlb2m => Some(2048),
            Backing::Hugetlb1g => Some(1 << 20),
            _ => None,
        }
    }

    /// True for the backings on huge pages (hugetlb or THP): the side of the 4 KB comparison that
    /// removes the faults.
    pub fn is_huge(self) -> bool {
        self.page_bytes() > 4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &b in Backing::ALL {
            assert_eq!(Backing::parse(b.name()).unwrap(), b);
            assert_eq!(serde_json::to_string(&b).unwrap(), format!("\"{b}\""));
        }
        let e = Backing::parse("8k").unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown page backing \"8k\" (choose from 4k, 4k-populate, thp, hugetlb-2m, hugetlb-1g)"
        );
        assert!(Backing::Hugetlb1g.is_huge() && Backing::Thp.is_huge());
        assert_eq!(format!("[{:>11}]", Backing::Page4k), "[         4k]");
        assert!(!Backing::Page4kPopulate.is_huge());
    }
}
