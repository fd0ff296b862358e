//! Memory and faults. The shared array of 64-byte buffer descriptors is mapped per process: on 4 KB pages
//! a minor fault maps a fault-around group, on 2 MB pages a fault maps a huge page (and the first touch by
//! anyone zeroes it). `lock` reads a random descriptor under the lock, so a process faults with the
//! probability that the group is still unmapped; `txn` pops buffers in order and faults on every new group,
//! then reads the buffer's block (a pread and its first-touch fault) outside the lock. The fault-path
//! hypothesis (`fault_block_p`) lets a 4 KB fault sleep on a lock in the kernel until another CPU wakes it.

use crate::event::Ev;
use crate::metrics::Count;
use crate::sim::Sim;
use crate::task::Phase;
use crate::touch::Touches;
use axes::model::{Pages, Workload};
use results::model::Params;

/// A 2 MB page, bytes.
pub(crate) const HUGE: u64 = 2 << 20;

/// What the processes have mapped and what has been zeroed.
pub(crate) struct Memory {
    /// Fault groups of the descriptor array (fault-around groups on 4 KB pages, 2 MB pages).
    pub(crate) groups: u64,
    /// 2 MB pages of the array zeroed so far (all at the start: the array is initialised before the run).
    pub(crate) zeroed_2m: u64,
    /// `txn`: the next buffer the free list hands out.
    pub(crate) next_buf: u64,
    /// `txn`: block groups (64 KB on 4 KB pages, 2 MB pages) somebody has touched (they go in order).
    pub(crate) blocks_zeroed: u64,
    /// `txn` on 4 KB pages: the CPU that last faulted each descriptor group in (u32::MAX: nobody yet).
    pub(crate) desc_fault_cpu: Vec<u32>,
    /// `txn`: the structures every backend touches besides its allocations (`touch`).
    pub(crate) touches: Touches,
}

impl Memory {
    /// The memory of a run of `p` before anyone ran.
    pub(crate) fn new(p: &Params) -> Memory {
        let groups = fault_groups(p);
        Memory {
            groups,
            zeroed_2m: if p.pages == Pages::P2m { groups } else { 0 },
            next_buf: 0,
            blocks_zeroed: 0,
            desc_fault_cpu: if p.workload == Workload::Txn && p.pages == Pages::P4k {
                vec![u32::MAX; groups as usize]
            } else {
                Vec::new()
            },
            touches: Touches::new(p),
        }
    }

    /// The groups a worker that has done `ops` operations has mapped: about
    /// groups x (1 - (1 - 1/groups)^ops).
    pub(crate) fn touched_after(&self, ops: u64) -> u64 {
        let (k, g) = (ops as f64, self.groups as f64);
        (g * (1.0 - (-k / g).exp())) as u64
    }
}

/// The fault groups of the descriptor array.
fn fault_groups(p: &Params) -> u64 {
    let bytes = p.descriptors * 64;
    match p.pages {
        Pages::P4k => (bytes / (4096 * p.fault_around_pages.max(1))).max(1),
        Pages::P2m => (bytes / HUGE).max(1),
    }
}

/// A fault that maps memory this process had not mapped (its zeroing not included), ns.
pub(crate) fn map_fault_ns(p: &Params) -> u64 {
    match p.pages {
        Pages::P4k => p.fault_4k_ns,
        Pages::P2m => p.fault_2m_map_ns,
    }
}

/// The half of `access_4k_ns` spent in each of the two parts of an operation (TLB misses on 4 KB pages).
fn access_ns(p: &Params) -> u64 {
    match p.pages {
        Pages::P4k => p.access_4k_ns / 2,
        Pages::P2m => 0,
    }
}

impl Sim {
    /// The critical section proper, its TLB misses included, ns.
    pub(crate) fn cs_ns(&self) -> u64 {
        self.p.cs_ns + access_ns(&self.p)
    }

    /// The `lock` workload's user time per operation outside the lock, ns.
    pub(crate) fn work_ns(&self) -> u64 {
        self.p.work_ns + self.p.op_ns + access_ns(&self.p)
    }

    /// The new holder `t` reads the free list's head descriptor: does that fault? `lock`: a random
    /// descriptor, unmapped with the share of groups this process has not touched (one draw); `txn`: the
    /// next buffer in order, a fault when its group differs from the last one this process popped.
    pub(crate) fn descriptor_faults(&mut self, t: u32) -> bool {
        let p = &self.p;
        match p.workload {
            Workload::Lock => {
                let task = &self.tasks[t as usize];
                let fault_p = 1.0 - task.touched as f64 / self.mem.groups as f64;
                self.rng.unit() < fault_p
            }
            Workload::Txn => {
                // The free list hands out buffers in order; the holder reads the head's descriptor.
                let buf = self.mem.next_buf;
                self.mem.next_buf = (buf + 1) % p.descriptors;
                let per = match p.pages {
                    Pages::P4k => p.fault_around_pages.max(1) * 4096 / 64,
                    Pages::P2m => HUGE / 64,
                };
                let task = &mut self.tasks[t as usize];
                task.buf = buf;
                let g = buf / per;
                std::mem::replace(&mut task.desc_group, g) != g
            }
        }
    }

    /// Whether a fault (if `faults`) blocks in the fault path: 4 KB pages only, one draw then.
    pub(crate) fn fault_blocks(&mut self, faults: bool) -> bool {
        faults && self.p.pages == Pages::P4k && self.rng.unit() < self.p.fault_block_p
    }

    /// The holder `t` starts its descriptor fault; returns its length, ns. In `txn` on 4 KB pages the
    /// group is the one every backend is popping from, so when another CPU faulted it in last, each of its
    /// pages' `struct page` line comes from there: the fault-around path takes a reference, the page lock
    /// and a map count on every page it maps (mm/filemap.c, `filemap_map_pages`), one line transfer each.
    pub(crate) fn start_descriptor_fault(&mut self, t: u32) -> u64 {
        let p = &self.p;
        let task = &mut self.tasks[t as usize];
        task.touched += 1;
        self.metrics.count(Count::Fault, self.clock.now);
        let mut d = map_fault_ns(p);
        if let Some(last) = self.mem.desc_fault_cpu.get_mut(task.desc_group as usize) {
            if *last != u32::MAX && *last != task.cpu {
                d += p.fault_around_pages * p.lock_transfer_ns;
            }
            *last = task.cpu;
        }
        if p.pages == Pages::P2m && self.mem.zeroed_2m < self.mem.groups {
            self.mem.zeroed_2m += 1;
            d += p.fault_2m_zero_ns;
        }
        task.phase = Phase::Fault;
        task.remaining = d;
        d
    }

    /// The fault under the lock on `c` is done: it blocked (the hypothesis) or the critical section runs.
    pub(crate) fn fault_end(&mut self, c: u32, t: u32) {
        let task = &mut self.tasks[t as usize];
        if task.fault_blocks {
            // The fault path sleeps on a lock; another CPU wakes it.
            task.fault_blocks = false;
            task.remaining = 0;
            let at = self.clock.now + self.p.fault_block_ns;
            self.block(c, t, None);
            self.clock.push(at, Ev::RemoteWake(t));
            return;
        }
        task.phase = Phase::Cs;
        if !self.return_to_user(c, true) {
            let d = self.cs_ns();
            self.cs_after_fault(c, t, d);
        } else {
            let d = self.p.cs_ns;
            self.tasks[t as usize].remaining = d;
        }
    }

    /// `txn`: the pread of the block of the buffer `t` just popped, ns: a first touch in this process
    /// faults (outside the lock); the first touch by anyone also zeroes the memory.
    pub(crate) fn read_ns(&mut self, t: u32) -> u64 {
        let p = &self.p;
        let (per, bytes) = match p.pages {
            Pages::P4k => (
                (p.fault_around_pages.max(1) * 4096 / 8192).max(1),
                p.fault_around_pages.max(1) * 4096,
            ),
            Pages::P2m => (HUGE / 8192, HUGE),
        };
        let g = self.tasks[t as usize].buf / per;
        let mut d = p.read_ns;
        if std::mem::replace(&mut self.tasks[t as usize].block_group, g) != g {
            d += map_fault_ns(p);
            if g >= self.mem.blocks_zeroed {
                self.mem.blocks_zeroed = g + 1;
                d += p.fault_2m_zero_ns * bytes / HUGE;
            }
            self.metrics.count(Count::Fault, self.clock.now);
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::quick;
    use axes::model::{Model, Pages};

    #[test]
    fn faults_show_on_4k_only_and_cost_throughput() {
        let a = quick(Model::None, Pages::P4k, 2, 8);
        let b = quick(Model::None, Pages::P2m, 2, 8);
        assert!(
            a.minflt_per_op > 0.05 && b.minflt_per_op < 0.01,
            "{} {}",
            a.minflt_per_op,
            b.minflt_per_op
        );
        assert!(a.ops_per_s < b.ops_per_s);
        assert!(a.cpu.faults > 0.0 && b.cpu.faults < a.cpu.faults);
    }
}
