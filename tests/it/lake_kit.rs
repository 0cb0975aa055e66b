//! What the lake tests share: the binary, simulated databases, exports, and
//! the lake read back file by file and row by row.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_attempt-ledger");

pub fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

/// `args`' stdout; a failure fails the test with its stderr.
pub fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A database `name` of `workflows` simulated workflows of `scenario`.
pub fn database(dir: &Path, name: &str, scenario: &str, workflows: u32, seed: u32) -> PathBuf {
    let db = dir.join(format!("{name}.duckdb"));
    ingest(&db, dir, scenario, workflows, seed);
    db
}

/// Adds `workflows` simulated workflows of `scenario` to `db`.
pub fn ingest(db: &Path, dir: &Path, scenario: &str, workflows: u32, seed: u32) {
    let file = dir.join(format!("{scenario}-{seed}.jsonl"));
    let (workflows, seed) = (workflows.to_string(), seed.to_string());
    let records = ok(&["simulate", "--scenario", scenario, "--workflows", &workflows, "--seed", &seed]);
    std::fs::write(&file, records).unwrap();
    ok(&["ingest", "--db", db.to_str().unwrap(), file.to_str().unwrap()]);
}

/// `export` of `db` to `lake` as `node`, to spawn or run.
pub fn export_command(db: &Path, lake: &Path, node: &str) -> Command {
    let mut command = Command::new(BIN);
    command.args(["export", "--db"]).arg(db).arg("--lake").arg(lake).args(["--node-id", node]);
    command
}

pub fn export(db: &Path, lake: &Path, node: &str, extra: &[&str]) -> Output {
    export_command(db, lake, node).args(extra).output().unwrap()
}

/// The report of `db` as JSON, without the audit.
pub fn report_of(db: &Path) -> Value {
    serde_json::from_str(&ok(&["report", "--db", db.to_str().unwrap(), "--format", "json", "--no-audit"]))
        .unwrap()
}

pub fn attempts_of(db: &Path) -> u64 {
    report_of(db)["attempts"]["total"].as_u64().unwrap()
}

/// Every copy in the lake, read back by DuckDB itself: (attempt id, node,
/// lake number).
pub fn copies(lake: &Path) -> Vec<(String, String, i64)> {
    let conn = duckdb::Connection::open_in_memory().unwrap();
    let glob = lake.join("attempts/*/*/*.parquet");
    let sql = format!(
        "SELECT attempt_id, ingest_node, ingest_seq FROM read_parquet('{}') ORDER BY ALL",
        glob.display()
    );
    let mut statement = conn.prepare(&sql).unwrap();
    statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect()
}

/// Every file under `dir`, hidden ones too, sorted.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The attempts files of a lake.
pub fn parquet_files(lake: &Path) -> Vec<PathBuf> {
    walk(&lake.join("attempts"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect()
}
