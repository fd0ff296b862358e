//! How many CPUs there are, in the two senses the project needs.

/// The CPUs this process may run on (its affinity mask and cgroup quota, as
/// [`std::thread::available_parallelism`] reads them); 1 when unknown. What a run can spread over: reader
/// threads, a guest's vCPUs.
pub fn usable() -> u32 {
    std::thread::available_parallelism()
        .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX))
        .unwrap_or(1)
}

/// The CPUs online in the machine (`sysconf(_SC_NPROCESSORS_ONLN)`); 1 when unknown. What a lock holder
/// may be running on, whatever this process's mask.
pub fn online() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        u32::try_from(n).unwrap_or(u32::MAX)
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn at_least_one_and_usable_within_online() {
        assert!(super::usable() >= 1);
        assert!(super::online() >= 1);
    }
}
