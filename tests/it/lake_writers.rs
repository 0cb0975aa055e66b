//! Who writes a lake: a node id is bound to the database that first
//! exported under it; another database is refused at start with what to
//! do, in either order and racing; a node rebuilt under its id, or restored
//! from a backup, continues after the lake's numbers and never writes over
//! them; a kill between the claim and the first file loses nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::lake_kit::{
    attempts_of, copies, database, export, export_command, ingest, ok, parquet_files, run,
};

use serde_json::Value;

/// Every attempts file of the lake with its bytes.
fn files(lake: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    parquet_files(lake).into_iter().map(|p| (p.clone(), std::fs::read(&p).unwrap())).collect()
}

fn lake_check(lake: &Path) -> (Option<i32>, Value) {
    let out = run(&["lake", "check", lake.to_str().unwrap(), "--format", "json"]);
    (out.status.code(), serde_json::from_slice(&out.stdout).unwrap_or(Value::Null))
}

fn report_lake(lake: &Path) -> Value {
    serde_json::from_str(&ok(&["report", "--lake", lake.to_str().unwrap(), "--format", "json", "--no-audit"]))
        .unwrap()
}

#[track_caller]
fn assert_refused(out: &Output, node: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("node id `{node}`"))
            && stderr.contains("bound to another database")
            && stderr.contains("--replace-node"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("bound to another database").count(), 1, "said once: {stderr}");
}

/// The case, in both orders: `a` (203-ish attempts) and `b` export
/// as `n1`; the second is refused, and the lake keeps the first's attempts
/// whole, byte for byte.
#[test]
fn a_second_database_under_a_node_id_is_refused_in_either_order() {
    let dir = tempfile::tempdir().unwrap();
    let a = database(dir.path(), "a", "rate-limit-fallback", 120, 1);
    let b = database(dir.path(), "b", "naive-retries", 150, 2);
    for (round, (first, second)) in [(&a, &b), (&b, &a)].into_iter().enumerate() {
        // Fresh copies each round: a database keeps the node id it exported under.
        let copy = |db: &Path| {
            let to = dir.path().join(format!("{}-{round}.duckdb", db.file_stem().unwrap().to_string_lossy()));
            std::fs::copy(db, &to).unwrap();
            to
        };
        let (first, second) = (&copy(first), &copy(second));
        let lake = dir.path().join(format!("lake-{round}"));
        assert!(export(first, &lake, "n1", &[]).status.success());
        let before = files(&lake);
        assert_refused(&export(second, &lake, "n1", &[]), "n1");
        assert_eq!(files(&lake), before, "no file of the first database was touched");
        assert_eq!(copies(&lake).len() as u64, attempts_of(first));
        // The refused database may export under an id of its own.
        assert!(export(second, &lake, "n2", &[]).status.success());
        assert_eq!(
            report_lake(&lake)["attempts"]["total"].as_u64().unwrap(),
            attempts_of(first) + attempts_of(second)
        );
        assert_eq!(lake_check(&lake).0, Some(0));
    }
}

/// Two databases racing for one node id in a new lake, many times: exactly
/// one wins each race, the other is refused, and the lake holds the
/// winner's attempts once.
#[test]
fn databases_racing_for_a_node_id_never_both_win() {
    let dir = tempfile::tempdir().unwrap();
    let a = database(dir.path(), "a", "gateway-reroute", 150, 3);
    let b = database(dir.path(), "b", "naive-retries", 150, 4);
    let mut winners = BTreeSet::new();
    for round in 0..6 {
        let lake = dir.path().join(format!("race-{round}"));
        let spawn = |db: &Path| {
            export_command(db, &lake, "n1").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
        };
        let (one, two) = (spawn(&a), spawn(&b));
        let (one, two) = (one.wait_with_output().unwrap(), two.wait_with_output().unwrap());
        let won: Vec<&Path> = [(&one, a.as_path()), (&two, b.as_path())]
            .into_iter()
            .filter(|(out, _)| out.status.success())
            .map(|(_, db)| db)
            .collect();
        assert_eq!(won.len(), 1, "round {round}: {one:?} {two:?}");
        let lost = if won[0] == a.as_path() { &two } else { &one };
        assert_refused(lost, "n1");
        assert_eq!(copies(&lake).len() as u64, attempts_of(won[0]), "round {round}");
        winners.insert(won[0].to_path_buf());
        let claims = std::fs::read_dir(lake.join("_nodes/n1"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("claim-"));
        assert_eq!(claims.count(), 1, "one claim in round {round}");
    }
    eprintln!("winners over 6 races: {winners:?}");
}

/// A node's disk is lost and it is rebuilt under its old id: the new
/// database is refused until it says it replaces the old one, then its
/// exports are numbered after the lake's, and the lake holds both.
#[test]
fn a_node_rebuilt_under_its_id_continues_after_the_lakes_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let old = database(dir.path(), "old", "rate-limit-fallback", 100, 5);
    ingest(&old, dir.path(), "naive-retries", 80, 6);
    assert!(export(&old, &lake, "host-1", &[]).status.success());
    let high_before = copies(&lake).iter().map(|c| c.2).max().unwrap();
    let before = files(&lake);

    let rebuilt = database(dir.path(), "rebuilt", "gateway-reroute", 90, 7);
    assert_refused(&export(&rebuilt, &lake, "host-1", &[]), "host-1");
    let out = export(&rebuilt, &lake, "host-1", &["--replace-node"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("it is now bound to this one"), "{stderr}");
    assert!(stderr.contains(&format!("reach number {high_before}")), "says how it knew: {stderr}");
    let after = files(&lake);
    for (path, bytes) in &before {
        assert_eq!(after.get(path), Some(bytes), "{} was rewritten", path.display());
    }
    let lake_copies = copies(&lake);
    let new_numbers: BTreeSet<i64> = lake_copies.iter().map(|c| c.2).filter(|n| *n > high_before).collect();
    assert!(!new_numbers.is_empty(), "the rebuilt node's rows are numbered after the old one's");
    assert_eq!(lake_copies.len() as u64, attempts_of(&old) + attempts_of(&rebuilt));
    // The old database is the one refused now.
    assert_refused(&export(&old, &lake, "host-1", &[]), "host-1");
    let (code, checked) = lake_check(&lake);
    assert_eq!(code, Some(0), "{checked:#}");
    let node = &checked["nodes"][0];
    assert_eq!(node["claims"].as_array().unwrap().len(), 2);
    assert_eq!(node["gaps"], serde_json::json!([]));
}

/// A backup of a node's database is restored after the node exported
/// more: it is the same database, so it is not refused; it finds the
/// lake's numbers past its own, says so, and continues after them. The
/// lake ends with every attempt of every phase once, and the files written
/// before the restore are untouched.
#[test]
fn a_restored_backup_continues_after_the_lakes_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let db = database(dir.path(), "node", "rate-limit-fallback", 100, 8);
    assert!(export(&db, &lake, "n1", &[]).status.success());
    let backup = dir.path().join("backup.duckdb");
    std::fs::copy(&db, &backup).unwrap();
    // After the backup: more writes, exported (numbers the backup never had).
    ingest(&db, dir.path(), "naive-retries", 70, 9);
    assert!(export(&db, &lake, "n1", &[]).status.success());
    let before = files(&lake);
    let high = copies(&lake).iter().map(|c| c.2).max().unwrap();

    // The disk is lost; the backup comes back and gets new writes.
    std::fs::copy(&backup, &db).unwrap();
    ingest(&db, dir.path(), "gateway-reroute", 60, 10);
    let out = export(&db, &lake, "n1", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("reach number {high}")) && stderr.contains("restored backup"),
        "{stderr}"
    );
    let after = files(&lake);
    for (path, bytes) in &before {
        assert_eq!(after.get(path), Some(bytes), "{} was rewritten", path.display());
    }
    // Every phase once: the reference is one database that got all three.
    let reference = dir.path().join("reference.duckdb");
    for (scenario, workflows, seed) in
        [("rate-limit-fallback", 100, 8), ("naive-retries", 70, 9), ("gateway-reroute", 60, 10)]
    {
        ingest(&reference, dir.path(), scenario, workflows, seed);
    }
    let lake_copies = copies(&lake);
    let ids: BTreeSet<&String> = lake_copies.iter().map(|c| &c.0).collect();
    assert_eq!(ids.len(), lake_copies.len(), "each attempt once");
    assert_eq!(lake_copies.len() as u64, attempts_of(&reference));
    let mut from_lake = report_lake(&lake);
    from_lake.as_object_mut().unwrap().remove("lake");
    let want: Value = serde_json::from_str(&ok(&[
        "report",
        "--db",
        reference.to_str().unwrap(),
        "--format",
        "json",
        "--no-audit",
    ]))
    .unwrap();
    assert_eq!(from_lake["workflows"], want["workflows"]);
    assert_eq!(from_lake["cost_usd"], want["cost_usd"]);
    assert_eq!(lake_check(&lake).0, Some(0));
    // Exporting again finds nothing new and rewrites nothing.
    let again = export(&db, &lake, "n1", &[]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("already holds every attempt"));
}

/// kill -9 after the node id is claimed and before the first file is in
/// place: the claim stands (another database is still refused), and the
/// export done again puts every attempt in the lake once.
#[test]
fn a_kill_between_the_claim_and_the_first_file_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), "a", "overnight-529-storm", 20_000, 11);
    let other = database(dir.path(), "b", "naive-retries", 50, 12);
    let stored = attempts_of(&db);
    let mut landed = false;
    for round in 0..20 {
        let lake = dir.path().join(format!("lake-{round}"));
        let mut child =
            export_command(&db, &lake, "n1").stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let claim = lake.join("_nodes/n1/claim-000001.json");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !claim.exists() && std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none() {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        Command::new("kill").args(["-KILL", &child.id().to_string()]).status().unwrap();
        child.wait().unwrap();
        if !claim.exists() || !files(&lake).is_empty() {
            continue;
        }
        landed = true;
        assert_refused(&export(&other, &lake, "n1", &[]), "n1");
        assert!(export(&db, &lake, "n1", &[]).status.success());
        let lake_copies = copies(&lake);
        assert_eq!(lake_copies.len() as u64, stored, "every attempt once");
        assert_eq!(lake_check(&lake).0, Some(0));
        break;
    }
    assert!(landed, "no kill landed between the claim and the first file");
}

/// A `serve --lake` running as a node that another database takes over
/// (`--replace-node`) stops writing as it: its next exports fail, counted
/// in `/metrics`, and the lake gets none of its rows from then on.
#[test]
fn a_running_serve_stops_writing_as_a_node_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let served = dir.path().join("served.duckdb");
    let service = crate::service::ServiceProcess::start(
        &served,
        &["--lake", lake.to_str().unwrap(), "--node-id", "n1", "--lake-interval", "1s"],
    );
    let records = |prefix: &str| {
        (0..20)
            .map(|i| crate::rec(serde_json::json!({"workflow_id": format!("{prefix}{i}"), "attempt_id": format!("{prefix}{i}")})))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (status, _, _) =
        service.post("/v1/attempts", "application/x-ndjson", None, records("before-").as_bytes());
    assert_eq!(status, 200);
    crate::wait_for("an export", std::time::Duration::from_secs(60), || {
        !files(&lake).is_empty() && copies(&lake).len() >= 20
    });
    let other = database(dir.path(), "other", "naive-retries", 30, 13);
    assert!(export(&other, &lake, "n1", &["--replace-node"]).status.success());
    let (status, _, _) =
        service.post("/v1/attempts", "application/x-ndjson", None, records("after-").as_bytes());
    assert_eq!(status, 200);
    let failures = || -> f64 {
        let text = service.metrics();
        text.lines()
            .find(|l| l.starts_with("attempt_ledger_lake_export_failures_total"))
            .and_then(|l| l.split_whitespace().last()?.parse().ok())
            .unwrap_or(0.0)
    };
    crate::wait_for("a failed export", std::time::Duration::from_secs(60), || failures() >= 1.0);
    assert!(service.terminate().success());
    let lake_copies = copies(&lake);
    assert!(lake_copies.iter().all(|(id, _, _)| !id.starts_with("after-")), "no row after the takeover");
    assert_eq!(lake_copies.len() as u64, 20 + attempts_of(&other));
}
