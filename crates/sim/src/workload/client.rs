//! `txn`'s pgbench threads (`pgbench -j`): tasks on the same CPUs as the backends. A thread serves the
//! connections of `workers / threads` backends: it sleeps (in `ppoll`) until a result arrives, handles the
//! results waiting for it one at a time (`client_stmt_ns` each: receive and parse it, build and send the
//! next statement), and the send wakes the backend, which was asleep in its receive. So the client's CPU
//! competes with the backends' for the same CPUs, and every statement's wakeups (the thread's and the
//! backend's) come from another task, on another CPU or the same one, as in pgbench
//! (src/bin/pgbench/pgbench.c, `threadRun`).

use crate::sim::Sim;
use crate::task::{Phase, State};
use axes::model::Workload;
use results::model::Params;

/// pgbench threads a run of `p` has: `txn_client_threads` (None: one per CPU), at most one per backend;
/// none outside `txn`.
pub(crate) fn threads(p: &Params) -> u32 {
    if p.workload != Workload::Txn {
        return 0;
    }
    p.txn_client_threads.unwrap_or(p.cpus).min(p.workers)
}

impl Sim {
    /// The task of the thread serving backend `t` (connections go to threads round robin), and its queue.
    fn thread_of(&self, t: u32) -> (u32, usize) {
        let q = t as usize % self.clients.len();
        (self.p.workers + q as u32, q)
    }

    /// Backend `t` on `c` sent its result and sleeps in its receive; the result wakes its thread if the
    /// thread sleeps.
    pub(crate) fn result_sent(&mut self, c: u32, t: u32) {
        let (th, q) = self.thread_of(t);
        self.clients[q].push_back(t);
        self.block(c, t, None);
        if self.tasks[th as usize].state == State::Sleeping {
            let remote = self.tasks[th as usize].cpu != c;
            self.wake(th, remote);
        }
    }

    /// Thread `th` on `c` handled the result at the head of its queue and sent that backend its next
    /// statement: it goes on with the next result or sleeps, and the backend wakes.
    pub(crate) fn client_end(&mut self, c: u32, th: u32) {
        let q = (th - self.p.workers) as usize;
        let b = self.clients[q]
            .pop_front()
            .expect("a thread runs only with a result to handle");
        if self.clients[q].is_empty() {
            let task = &mut self.tasks[th as usize];
            task.phase = Phase::Client;
            task.remaining = 0;
            self.block(c, th, None);
        } else {
            self.start_phase(c, th, Phase::Client);
        }
        let remote = self.tasks[b as usize].cpu != c;
        self.wake(b, remote);
    }
}

#[cfg(test)]
mod tests {
    use crate::simulate;
    use axes::model::{Model, Pages, Workload};
    use results::model::Params;

    #[test]
    fn client_threads_take_cpu_and_carry_every_statement() {
        let run = |threads: Option<u32>, client_stmt_ns: u64| {
            simulate(&Params {
                workload: Workload::Txn,
                model: Model::None,
                pages: Pages::P2m,
                cpus: 4,
                workers: 64,
                txn_client_threads: threads,
                client_stmt_ns,
                duration_ns: 200_000_000,
                warmup_ns: 20_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        // CPU-bound: the clients' CPU comes out of the backends' share, so a client statement as dear as
        // the backend's halves the throughput.
        let stmt = Params::default().stmt_ns;
        let free = run(Some(4), 0).txn_per_s.unwrap();
        let dear = run(Some(4), stmt).txn_per_s.unwrap();
        assert!(dear < 0.55 * free && dear > 0.45 * free, "{free} -> {dear}");
        // One thread for 64 backends: its CPU serialises the statements.
        let one = run(Some(1), 50_000).txn_per_s.unwrap();
        assert!(one < 1e9 / (5.0 * 50_000.0) * 1.03, "{one}");
        // No threads: the fixed sleep of the model before them, no client CPU.
        assert!(run(Some(0), stmt).txn_per_s.unwrap() > free * 0.9);
    }
}
