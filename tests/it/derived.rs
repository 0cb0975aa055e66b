//! The derived tables (per-workflow facts, minute rollups, totals) across
//! the store's life: retention, a bulk import cut short, reopening.

use attempt_ledger::ingest::jsonl;
use attempt_ledger::store::{ReportFilter, Store};

use crate::{FIXTURE, report_of, store_with};

fn fixture_lines() -> Vec<String> {
    FIXTURE.lines().map(String::from).collect()
}

/// The workflow id and first start of each fixture line, as stored.
fn first_starts() -> std::collections::HashMap<String, chrono::DateTime<chrono::Utc>> {
    let decoded = jsonl::decode_lines(FIXTURE, 1);
    let mut first = std::collections::HashMap::new();
    for a in decoded.attempts {
        first
            .entry(a.workflow_id.clone())
            .and_modify(|t: &mut chrono::DateTime<chrono::Utc>| *t = (*t).min(a.started_at))
            .or_insert(a.started_at);
    }
    first
}

/// `prune --before T` leaves exactly what a database given only the
/// workflows that started at or after T would hold: no workflow is cut in
/// two, and the rollups and totals follow.
#[test]
fn pruning_removes_whole_workflows_and_their_derived_rows() {
    let lines = fixture_lines();
    let store = store_with(&lines);
    let cut = chrono::DateTime::parse_from_rfc3339("2026-11-28T02:01:30Z").unwrap().to_utc();
    let first = first_starts();
    let kept: Vec<String> = lines
        .iter()
        .filter(|line| {
            let id = serde_json::from_str::<serde_json::Value>(line).unwrap()["workflow_id"]
                .as_str()
                .unwrap()
                .to_string();
            first[&id] >= cut
        })
        .cloned()
        .collect();
    assert!(!kept.is_empty() && kept.len() < lines.len(), "the cut must split the fixture");

    let (workflows, attempts) = store.prune(cut).unwrap();
    assert!(workflows > 0 && attempts >= workflows);
    let remaining = store_with(&kept);
    assert_eq!(store.attempt_count().unwrap(), remaining.attempt_count().unwrap());
    assert_eq!(report_of(&store, &ReportFilter::default()), report_of(&remaining, &ReportFilter::default()));
    assert_eq!(store.derived_digest().unwrap(), remaining.derived_digest().unwrap());
}

/// A bulk import leaves the derived tables stale until its last pass; if
/// the process dies before that pass, the next open derives them, so no
/// report ever reads attempts without their facts.
#[test]
fn a_bulk_import_cut_short_is_derived_when_the_database_is_opened_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.duckdb");
    let decoded = jsonl::decode_lines(FIXTURE, 1);
    {
        let store = Store::open(&path).unwrap();
        store.begin_bulk();
        store.write_batch(&decoded.attempts).unwrap();
        assert!(store.derived_stale().unwrap());
        // Dropped without finish_bulk: the import was killed.
    }
    let store = Store::open(&path).unwrap();
    assert!(!store.derived_stale().unwrap());
    let expected = store_with(&fixture_lines());
    assert_eq!(report_of(&store, &ReportFilter::default()), report_of(&expected, &ReportFilter::default()));
    assert_eq!(store.derived_digest().unwrap(), expected.derived_digest().unwrap());
}

/// DuckDB's memory limit comes from ATTEMPT_LEDGER_MEMORY_LIMIT; a value
/// it cannot read is refused with the variable's name, before anything is
/// opened for writing.
#[test]
fn a_bad_memory_limit_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("attempts.jsonl");
    std::fs::write(&input, FIXTURE).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .args(["ingest", "--no-progress", "--db"])
        .arg(dir.path().join("x.duckdb"))
        .arg(&input)
        .env("ATTEMPT_LEDGER_MEMORY_LIMIT", "lots")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ATTEMPT_LEDGER_MEMORY_LIMIT=lots"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("accepted"));
}

/// `attempt-ledger prune` on a file: the pruned database replaces the old
/// one through a compacted copy, smaller, with the same answers as pruning
/// in place.
#[test]
fn prune_compacts_the_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ledger.duckdb");
    let input = dir.path().join("attempts.jsonl");
    // Enough rows that the freed space shows in the file size.
    let mut lines = Vec::new();
    for copy in 0..400 {
        for line in FIXTURE.lines() {
            let mut record: serde_json::Value = serde_json::from_str(line).unwrap();
            let id = record["workflow_id"].as_str().unwrap().to_string();
            record["workflow_id"] = serde_json::json!(format!("{id}-{copy}"));
            lines.push(record.to_string());
        }
    }
    std::fs::write(&input, lines.join("\n")).unwrap();
    let bin = env!("CARGO_BIN_EXE_attempt-ledger");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(bin).args(args).arg("--db").arg(&db).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run(&["ingest", "--no-progress", input.to_str().unwrap()]);
    let size_before = std::fs::metadata(&db).unwrap().len();
    let out = run(&["prune", "--before", "2026-11-28T02:03:00Z"]);
    assert!(out.contains("compacted"), "{out}");
    assert!(std::fs::metadata(&db).unwrap().len() < size_before, "{out}");
    assert!(!dir.path().join("ledger.duckdb.compacting").exists());

    let pruned_in_place = store_with(&lines);
    pruned_in_place
        .prune(chrono::DateTime::parse_from_rfc3339("2026-11-28T02:03:00Z").unwrap().to_utc())
        .unwrap();
    let store = Store::open(&db).unwrap();
    assert!(!store.derived_stale().unwrap());
    assert_eq!(
        report_of(&store, &ReportFilter::default()),
        report_of(&pruned_in_place, &ReportFilter::default())
    );
    assert_eq!(store.derived_digest().unwrap(), pruned_in_place.derived_digest().unwrap());
}
