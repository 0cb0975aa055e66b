//! Queries over a stored database through this build's DuckDB, for
//! `scripts/bench.py` to set beside the same SQL in DuckDB's own release
//! build (its Python wheel) on the same file: how far the bundled engine is
//! from the official one on the columns the product stores.
//!
//!     cargo bench --bench scan -- DB ROUNDS SQL...
//!
//! Opens DB read-only, runs each SQL twice to warm the cache, then ROUNDS
//! times, and prints one JSON object: each SQL's median milliseconds.

// A harness, not a product path: it unwraps what it set up, and scan.rs
// reads a database file as DuckDB's own client would.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::time::Instant;

use duckdb::{AccessMode, Config, Connection};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let [db, rounds, queries @ ..] = args.as_slice() else {
        return Err("usage: scan DB ROUNDS SQL...".into());
    };
    let rounds: usize = rounds.parse().map_err(|_| format!("ROUNDS must be a count, got {rounds}"))?;
    if !(1..=1000).contains(&rounds) {
        return Err(format!("ROUNDS must be 1 to 1000, got {rounds}").into());
    }
    let conn = Connection::open_with_flags(db, Config::default().access_mode(AccessMode::ReadOnly)?)?;
    let mut medians = serde_json::Map::new();
    for sql in queries {
        let run = || -> Result<f64, duckdb::Error> {
            let began = Instant::now();
            let mut stmt = conn.prepare(sql)?;
            let mut rows = stmt.query([])?;
            while rows.next()?.is_some() {}
            Ok(began.elapsed().as_secs_f64() * 1000.0)
        };
        run()?;
        run()?;
        let mut times = (0..rounds).map(|_| run()).collect::<Result<Vec<_>, _>>()?;
        times.sort_by(f64::total_cmp);
        medians.insert(sql.clone(), serde_json::json!((times[times.len() / 2] * 1000.0).round() / 1000.0));
    }
    println!("{}", serde_json::Value::Object(medians));
    Ok(())
}
