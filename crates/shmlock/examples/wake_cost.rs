//! What a `futex_wake` that wakes somebody costs the waker (`shmlock::wake_cost`), the figure behind the
//! sim's `futex_wake_idle_ns`. `bench lock` records the same figure in its result's `costs`.
//!
//!     cargo run --release -p shmlock --example wake_cost [ROUNDS] [busy]

use shmlock::wake_cost;

fn pct(v: &mut [u64], q: f64) -> u64 {
    v.sort_unstable();
    v.get(((v.len().max(1) - 1) as f64 * q) as usize)
        .copied()
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(5000);
    let busy = args.iter().any(|a| a == "busy");
    let mut w = match wake_cost::measure(rounds, busy) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("wake_cost: {e}");
            std::process::exit(2);
        }
    };
    let target = if busy { "busy" } else { "idle" };
    println!(
        "futex_wake waking a waiter on a CPU that is {target}: {} of {rounds} rounds, p10 {} ns, p50 {} ns, p90 {} ns",
        w.woke.len(),
        pct(&mut w.woke, 0.1),
        pct(&mut w.woke, 0.5),
        pct(&mut w.woke, 0.9)
    );
    println!(
        "futex_wake with nobody queued: p50 {} ns",
        pct(&mut w.nobody, 0.5)
    );
}
