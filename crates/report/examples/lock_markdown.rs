//! Prints a `bench lock` result file as Markdown, or with `--table` as the text table (until `preemptlab
//! report` exists): `cargo run -p report --example lock_markdown -- [--table] results/bench-lock-....json`

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let table = args.iter().any(|a| a == "--table");
    let Some(path) = args.into_iter().find(|a| a != "--table") else {
        eprintln!("usage: lock_markdown RESULT.json");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2)
    });
    let r: results::lock::LockResult = serde_json::from_str(&text).unwrap_or_else(|e| {
        eprintln!("{path}: not a bench lock result: {e}");
        std::process::exit(2)
    });
    if table {
        print!("{}", report::lock_table::render(&r));
    } else {
        print!("{}", report::lock_table::markdown(&r));
    }
}
