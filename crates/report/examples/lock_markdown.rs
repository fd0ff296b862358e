//! Prints a `bench lock` result file as Markdown (until `preemptlab report` exists):
//! `cargo run -p report --example lock_markdown -- results/bench-lock-....json`

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: lock_markdown RESULT.json");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2)
    });
    let r: lab::lockrun::LockResult = serde_json::from_str(&text).unwrap_or_else(|e| {
        eprintln!("{path}: not a bench lock result: {e}");
        std::process::exit(2)
    });
    print!("{}", report::lock_table::markdown(&r));
}
