//! `lake expire`: retention in whole days. The lake after it reads, by
//! `report --lake` and by the engines' script, as a database that never
//! held the expired days; late attempts of those days exported afterwards
//! are not read, and the next run removes them.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::lake::{assert_same, engine_reports, sections};
use crate::lake_kit::{BIN, export, ok, report_of};

/// Simulated workflows of `scenario` within ten minutes of 10:00 UTC on
/// `day`, ingested into `db` and, when given, into `reference`.
pub(crate) fn on_day(dir: &Path, db: &Path, reference: Option<&Path>, scenario: &str, seed: u32, day: &str) {
    let start = format!("{day}T10:00:00Z");
    let seed_text = seed.to_string();
    let records = ok(&[
        "simulate",
        "--scenario",
        scenario,
        "--workflows",
        "40",
        "--seed",
        &seed_text,
        "--start",
        &start,
        "--duration",
        "10m",
    ]);
    let file = dir.join(format!("{scenario}-{seed}-{day}.jsonl"));
    std::fs::write(&file, records).unwrap();
    for db in std::iter::once(db).chain(reference) {
        ok(&["ingest", "--db", db.to_str().unwrap(), file.to_str().unwrap()]);
    }
}

fn day_files(lake: &Path, day: &str) -> usize {
    crate::lake_kit::walk(&lake.join(format!("attempts/day={day}")))
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .count()
}

fn lake_report(lake: &Path) -> Value {
    serde_json::from_str(&ok(&["report", "--lake", lake.to_str().unwrap(), "--format", "json", "--no-audit"]))
        .unwrap()
}

#[test]
fn expired_days_leave_the_lake_whole_and_late_attempts_of_them_are_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let (db, reference, lake) =
        (dir.path().join("a.duckdb"), dir.path().join("reference.duckdb"), dir.path().join("lake"));
    on_day(dir.path(), &db, None, "rate-limit-fallback", 1, "2026-11-01");
    on_day(dir.path(), &db, None, "overnight-529-storm", 2, "2026-11-02");
    on_day(dir.path(), &db, Some(&reference), "gateway-reroute", 3, "2026-11-03");
    on_day(dir.path(), &db, Some(&reference), "naive-retries", 4, "2026-11-05");
    assert!(export(&db, &lake, "a", &[]).status.success());
    let expired_files = day_files(&lake, "2026-11-01") + day_files(&lake, "2026-11-02");
    assert!(expired_files > 0);

    let lake_arg = lake.to_str().unwrap();
    let out = ok(&["lake", "expire", lake_arg, "--before", "2026-11-03"]);
    assert!(
        out.contains(&format!("holds no day before 2026-11-03: {expired_files} files of those days deleted")),
        "{out}"
    );
    assert!(!lake.join("attempts/day=2026-11-01").exists() && !lake.join("attempts/day=2026-11-02").exists());
    assert!(day_files(&lake, "2026-11-03") > 0, "the first day kept is kept");
    let check = Command::new(BIN).args(["lake", "check", lake_arg]).output().unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "no expired file counts as missing: {text}");
    assert!(text.contains("expired: every day before 2026-11-03"), "{text}");
    let want = sections(&report_of(&reference));
    assert_same(&sections(&lake_report(&lake)), &want, "report --lake after lake expire");
    let engine = &engine_reports("duckdb", &lake, &json!([{}]))[0];
    assert_same(&sections(engine), &want, "lake-report.py --engine duckdb after lake expire");

    // Attempts of an expired day that arrive late are exported as any
    // other, and no reader takes them; the next run deletes them.
    on_day(dir.path(), &db, None, "steady", 5, "2026-11-02");
    assert!(export(&db, &lake, "a", &[]).status.success());
    let late = day_files(&lake, "2026-11-02");
    assert!(late > 0);
    assert_same(&sections(&lake_report(&lake)), &want, "report --lake with late attempts of an expired day");
    let engine = &engine_reports("clickhouse", &lake, &json!([{}]))[0];
    assert_same(
        &sections(engine),
        &want,
        "lake-report.py --engine clickhouse with late attempts of an expired day",
    );
    assert_eq!(Command::new(BIN).args(["lake", "check", lake_arg]).status().unwrap().code(), Some(0));
    // An earlier day keeps the later horizon: days are never brought back.
    let out: Value = serde_json::from_str(&ok(&[
        "lake",
        "expire",
        lake_arg,
        "--before",
        "2026-11-01",
        "--format",
        "json",
    ]))
    .unwrap();
    assert_eq!(out["before"], "2026-11-03", "{out:#}");
    assert_eq!(out["deleted_files"], late as u64, "{out:#}");
    assert_eq!(day_files(&lake, "2026-11-02"), 0);

    // The day being written, or a later one, is never expired; a lake
    // with a table is expired only through its catalog.
    let tomorrow = (chrono::Utc::now().date_naive() + chrono::Duration::days(1)).to_string();
    let refused =
        Command::new(BIN).args(["lake", "expire", lake_arg, "--before", &tomorrow]).output().unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("after today"), "{refused:?}");
    let bad =
        Command::new(BIN).args(["lake", "expire", lake_arg, "--before", "2026-11-31"]).output().unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--before"), "{bad:?}");
    std::fs::create_dir_all(lake.join("metadata")).unwrap();
    let refused =
        Command::new(BIN).args(["lake", "expire", lake_arg, "--before", "2026-11-04"]).output().unwrap();
    assert!(String::from_utf8_lossy(&refused.stderr).contains("give --catalog"), "{refused:?}");
    assert!(day_files(&lake, "2026-11-03") > 0, "nothing is deleted when refused");
}
