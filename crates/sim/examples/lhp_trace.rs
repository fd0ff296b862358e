//! The scheduler's trace (`sim::simulate_traced`) for the reported host's 4 KB cells under `none` and
//! `lazy` (docs/model-calibration.md, "The reported host": its costs, 1 s after 1 s of warm-up, seed 1), or for any
//! run: `lhp_trace [model,...] [key=value...]`, the values as in `preemptlab sim --set`.
//!
//!     cargo run --release -p sim --example lhp_trace
//!     cargo run --release -p sim --example lhp_trace -- none,lazy eevdf=true
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (models, sets): (Vec<&String>, Vec<&String>) = args.iter().partition(|a| !a.contains('='));
    let models: Vec<axes::model::Model> = if models.is_empty() {
        vec![axes::model::Model::None, axes::model::Model::Lazy]
    } else {
        models
            .iter()
            .flat_map(|m| m.split(','))
            .map(|m| axes::model::Model::parse(m).expect("a model"))
            .collect()
    };
    for model in models {
        let mut p = results::model::Params {
            cpus: 96,
            workers: 1024,
            workload: axes::model::Workload::Txn,
            model,
            pages: axes::model::Pages::P4k,
            lock_transfer_ns: 45,
            fault_4k_ns: 2500,
            spin_ns: 15,
            duration_ns: 1_000_000_000,
            warmup_ns: 1_000_000_000,
            ..results::model::Params::default()
        };
        for kv in &sets {
            let (k, v) = kv.split_once('=').expect("key=value");
            let mut j = serde_json::to_value(&p).expect("params");
            j[k] = serde_json::from_str(v)
                .unwrap_or_else(|_| serde_json::Value::String(v.to_string()));
            p = serde_json::from_value(j).expect("a valid value");
        }
        let (o, t) = sim::simulate_traced(&p).expect("valid parameters");
        println!(
            "{}: {:.1}k tx/s, spinning {:.0}%, holder preemptions {:.0}/s",
            model.name(),
            o.txn_per_s.unwrap_or(0.0) / 1e3,
            o.cpu.spinning * 100.0,
            o.lhp_per_s
        );
        println!(
            "{}",
            serde_json::to_string_pretty(&t).expect("the trace serialises")
        );
    }
}
