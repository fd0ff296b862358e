//! What can happen at an instant of virtual time. Events that may have been overtaken carry the
//! generation they belong to and are dropped when it no longer matches.

/// An event.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) enum Ev {
    /// The running segment on a CPU ends (CPU, the CPU's generation when it started).
    SegEnd(u32, u64),
    /// The timer tick on a CPU.
    Tick(u32),
    /// A sleeping task's timer fires (pg_usleep ends): a local wakeup, from an interrupt on its CPU.
    TimerWake(u32),
    /// Another CPU wakes a sleeping task (the client's next statement, the end of a blocked fault).
    RemoteWake(u32),
    /// An IPI reaches a CPU.
    Ipi(u32),
    /// A granted rseq extension runs out (CPU, the CPU's generation at the grant).
    ExtEnd(u32, u64),
    /// `adaptive`: a parked waiter's bounded sleep ends (task, the park it belongs to).
    ParkTimeout(u32, u64),
}
