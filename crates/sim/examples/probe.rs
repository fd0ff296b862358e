//! Runs one model configuration from the command line: `probe cpus workers model lock pages secs [key=value...]`.
fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let mut p = results::model::Params {
        cpus: a[0].parse().unwrap(),
        workers: a[1].parse().unwrap(),
        model: axes::model::Model::parse(&a[2]).unwrap(),
        lock: axes::model::LockKind::parse(&a[3]).unwrap(),
        pages: axes::model::Pages::parse(&a[4]).unwrap(),
        duration_ns: (a[5].parse::<f64>().unwrap() * 1e9) as u64,
        ..results::model::Params::default()
    };
    for kv in &a[6..] {
        let (k, v) = kv.split_once('=').unwrap();
        let mut j = serde_json::to_value(&p).unwrap();
        j[k] = serde_json::from_str(v).unwrap();
        p = serde_json::from_value(j).unwrap();
    }
    let t = std::time::Instant::now();
    let o = sim::simulate(&p).unwrap();
    println!(
        "{:>9.0} ops/s {:>7.0} tps  spin {:.2} useful {:.2} fault {:.2} kern {:.2} sched {:.2} idle {:.2}  lhp/s {:.0} hold p99 {} acq p99 {} flt/op {:.3} cpu/op {:.0} sleeps/op {:.4} ev {} wall {:.2}s",
        o.ops_per_s, o.txn_per_s.unwrap_or(0.0), o.cpu.spinning, o.cpu.useful, o.cpu.faults, o.cpu.kernel, o.cpu.scheduler, o.cpu.idle,
        o.lhp_per_s, o.hold_ns.p99, o.acquire_ns.p99, o.minflt_per_op, o.cpu_ns_per_op, o.sleeps_per_op, o.events,
        t.elapsed().as_secs_f64()
    );
}
