//! The `lock` workload: `bench lock`'s operation (work, then the free-list pop under the lock at a random
//! descriptor) in a loop; a worker is replaced every `reconnect_every` operations, starting over with no
//! pages mapped.

use crate::sim::Sim;
use crate::task::Phase;

impl Sim {
    /// Is `t` due for replacement?
    pub(crate) fn respawn_due(&self, t: u32) -> bool {
        self.p.reconnect_every > 0
            && self.tasks[t as usize].ops_since_spawn >= self.p.reconnect_every
    }

    /// The replacement process on `c` starts: fresh page tables and s_lock state.
    pub(crate) fn respawned(&mut self, c: u32, t: u32) {
        let task = &mut self.tasks[t as usize];
        task.touched = 0;
        task.ops_since_spawn = 0;
        task.spins_per_delay = crate::lock::pg::DEFAULT_SPINS_PER_DELAY;
        task.phase = Phase::Work;
        task.remaining = 0;
        if !self.return_to_user(c, false) {
            self.start_phase(c, t, Phase::Work);
        }
    }
}
