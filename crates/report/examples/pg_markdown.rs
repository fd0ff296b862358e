//! Prints a `bench pg` result file as Markdown, or with `--table` as the text table:
//! `cargo run -p report --example pg_markdown -- [--table] results/bench-pg-....json`

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let table = args.iter().any(|a| a == "--table");
    let Some(path) = args.into_iter().find(|a| a != "--table") else {
        eprintln!("usage: pg_markdown [--table] RESULT.json");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2)
    });
    let r: results::pg::PgResult = serde_json::from_str(&text).unwrap_or_else(|e| {
        eprintln!("{path}: not a bench pg result: {e}");
        std::process::exit(2)
    });
    if table {
        print!("{}", report::pg_table::render(&r));
    } else {
        print!("{}", report::pg_table::markdown(&r));
    }
}
