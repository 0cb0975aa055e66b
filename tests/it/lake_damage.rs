//! A lake that tells what is wrong: each file no reader can use is named
//! once, by `report --lake`, `lake check` and `scripts/lake-report.py`
//! alike, and the readers refuse or (`--skip-bad-files`) answer without it
//! and say how many attempts they left out; `lake check` names gaps in a
//! node's numbers. A lake folder that is read-only or fills up fails an
//! export with what happened, and nothing the database holds is lost.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::lake::{assert_same, python_lake, sections};
use crate::lake_kit::{BIN, attempts_of, database, export, ingest, ok, parquet_files, report_of, run};

/// Runs `sql` in a DuckDB of its own (to write hostile Parquet files).
fn duckdb(sql: &str) {
    duckdb::Connection::open_in_memory().unwrap().execute_batch(sql).unwrap();
}

fn lake_id(lake: &Path) -> String {
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(lake.join("_lake.json")).unwrap()).unwrap();
    manifest["lake_id"].as_str().unwrap().to_string()
}

/// The rows an export's record says `file` (relative to `attempts/`) holds.
fn listed_rows(lake: &Path, node: &str, file: &str) -> u64 {
    for entry in std::fs::read_dir(lake.join("_nodes").join(node).join("exports")).unwrap().flatten() {
        let record: Value = serde_json::from_str(&std::fs::read_to_string(entry.path()).unwrap()).unwrap();
        for listed in record["files"].as_array().unwrap() {
            if listed["path"] == file {
                return listed["rows"].as_u64().unwrap();
            }
        }
    }
    panic!("no record lists {file}");
}

/// What a reason is, without the engine's own words after it.
fn kind(reason: &str) -> &str {
    reason.split(':').next().unwrap()
}

#[test]
fn each_bad_file_is_named_once_and_the_rest_is_read_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let a = database(dir.path(), "a", "rate-limit-fallback", 150, 21);
    let b = database(dir.path(), "b", "gateway-reroute", 120, 22);
    assert!(export(&a, &lake, "n1", &[]).status.success());
    assert!(export(&b, &lake, "n2", &[]).status.success());
    let this_lake = lake_id(&lake);
    // Another lake, sharing the folder's files by mistake.
    let other_lake = dir.path().join("other");
    let c = database(dir.path(), "c", "naive-retries", 60, 23);
    assert!(export(&c, &other_lake, "n1", &[]).status.success());

    // Files of node n1 (the lost one below is n2's).
    let good: Vec<PathBuf> = parquet_files(&lake)
        .into_iter()
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("n1-"))
        .collect();
    let partition = good[0].parent().unwrap().to_path_buf();
    let mut bad: Vec<(String, &str)> = Vec::new();
    let mut place = |name: &str, why: &'static str| {
        bad.push((
            format!("attempts/{}/{name}", partition.strip_prefix(lake.join("attempts")).unwrap().display()),
            why,
        ))
    };
    // A truncated copy (a copy interrupted, a disk error).
    std::fs::write(partition.join("n1-900-900.parquet"), &std::fs::read(&good[0]).unwrap()[..600]).unwrap();
    place("n1-900-900.parquet", "unreadable");
    // A file of the other lake.
    std::fs::copy(&parquet_files(&other_lake)[0], partition.join("n1-901-901.parquet")).unwrap();
    place("n1-901-901.parquet", "foreign");
    // Parquet no export wrote, one of a node this lake does not know, one
    // with other columns.
    let sql_path = |name: &str| partition.join(name).display().to_string();
    duckdb(&format!("COPY (SELECT 1 AS x) TO '{}' (FORMAT parquet);", sql_path("stray.parquet")));
    place("stray.parquet", "foreign");
    let source = good[0].display();
    duckdb(&format!(
        "COPY (SELECT * FROM read_parquet('{source}', hive_partitioning = false)) TO '{}' \
         (FORMAT parquet, KV_METADATA {{lake_id: '{this_lake}', node: 'ghost', export_id: 'x'}});",
        sql_path("ghost-1-1.parquet")
    ));
    place("ghost-1-1.parquet", "unknown node");
    duckdb(&format!(
        "COPY (SELECT * EXCLUDE (model) FROM read_parquet('{source}', hive_partitioning = false)) TO '{}' \
         (FORMAT parquet, KV_METADATA {{lake_id: '{this_lake}', node: 'n1', export_id: 'x'}});",
        sql_path("n1-902-902.parquet")
    ));
    place("n1-902-902.parquet", "wrong schema");
    std::fs::write(partition.join("NOTES.txt"), "copied by hand\n").unwrap();
    place("NOTES.txt", "foreign");
    // A file an export wrote, gone.
    let gone = parquet_files(&lake)
        .into_iter()
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("n2-"))
        .unwrap();
    let gone_rel = gone.strip_prefix(lake.join("attempts")).unwrap().display().to_string();
    let gone_rows = listed_rows(&lake, "n2", &gone_rel);
    std::fs::remove_file(&gone).unwrap();
    bad.push((format!("attempts/{gone_rel}"), "missing"));
    // Outside the partition folders.
    std::fs::copy(&good[0], lake.join("attempts/loose.parquet")).unwrap();
    bad.push(("attempts/loose.parquet".to_string(), "misplaced"));
    let want: BTreeSet<(String, String)> = bad.iter().map(|(p, k)| (p.clone(), k.to_string())).collect();
    let bad_paths: BTreeSet<String> = want.iter().map(|(p, _)| p.clone()).collect();

    // `report --lake` refuses, naming each once.
    let refused = run(&["report", "--lake", lake.to_str().unwrap(), "--no-audit"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    for path in &bad_paths {
        assert_eq!(stderr.matches(path.as_str()).count(), 1, "{path} named once:\n{stderr}");
    }
    assert!(stderr.contains("--skip-bad-files"), "{stderr}");

    // With --skip-bad-files it answers from the rest, and says what it left out.
    let skipped: Value = serde_json::from_str(&ok(&[
        "report",
        "--lake",
        lake.to_str().unwrap(),
        "--no-audit",
        "--format",
        "json",
        "--skip-bad-files",
    ]))
    .unwrap();
    let listed: BTreeSet<(String, String)> = skipped["lake"]["skipped_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap().to_string(), kind(f["reason"].as_str().unwrap()).to_string()))
        .collect();
    assert_eq!(listed, want);
    assert_eq!(skipped["lake"]["skipped_attempts"], gone_rows);
    assert_eq!(skipped["attempts"]["total"].as_u64().unwrap(), attempts_of(&a) + attempts_of(&b) - gone_rows);

    // `lake check` lists the same files and exits 4.
    let checked = run(&["lake", "check", lake.to_str().unwrap(), "--format", "json"]);
    assert_eq!(checked.status.code(), Some(4));
    let checked: Value = serde_json::from_slice(&checked.stdout).unwrap();
    let from_check: BTreeSet<String> =
        checked["bad"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap().to_string()).collect();
    assert_eq!(from_check, bad_paths);

    // scripts/lake-report.py: the same files, refused or skipped, with
    // ClickHouse and with Spark reading the rest.
    let script = format!("{}/scripts/lake-report.py", env!("CARGO_MANIFEST_DIR"));
    for engine in ["clickhouse", "spark"] {
        let out = python_lake().args([&script, "--engine", engine, lake.to_str().unwrap()]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{engine}: {stderr}");
        for path in &bad_paths {
            assert_eq!(stderr.matches(path.as_str()).count(), 1, "{engine}: {path} named once:\n{stderr}");
        }
        let out = python_lake()
            .args([&script, "--engine", engine, lake.to_str().unwrap(), "--skip-bad-files"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{engine}: {}", String::from_utf8_lossy(&out.stderr));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_same(&sections(&report), &sections(&skipped), &format!("{engine} --skip-bad-files"));
        let listed: BTreeSet<(String, String)> = report["lake"]["skipped_files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (f["path"].as_str().unwrap().to_string(), kind(f["reason"].as_str().unwrap()).to_string())
            })
            .collect();
        assert_eq!(listed, want, "{engine}");
        assert_eq!(report["lake"]["skipped_attempts"], gone_rows, "{engine}");
    }
}

/// `lake check` on a lake that lost an export's record: the node's numbers
/// have a gap, named by its range; an export begun and not finished is
/// listed as such, and is not a problem by itself.
#[test]
fn lake_check_names_gaps_and_unfinished_exports() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let db = database(dir.path(), "a", "rate-limit-fallback", 80, 31);
    assert!(export(&db, &lake, "n1", &[]).status.success());
    for seed in [32, 33] {
        ingest(&db, dir.path(), "naive-retries", 40, seed);
        assert!(export(&db, &lake, "n1", &[]).status.success());
    }
    let check = || {
        let out = run(&["lake", "check", lake.to_str().unwrap(), "--format", "json"]);
        (out.status.code(), serde_json::from_slice::<Value>(&out.stdout).unwrap())
    };
    let (code, clean) = check();
    assert_eq!(code, Some(0), "{clean:#}");
    assert_eq!(clean["nodes"][0]["exports"], 3);

    // An export begun after the last (in progress, or interrupted).
    let exports = lake.join("_nodes/n1/exports");
    let high = clean["nodes"][0]["high"].as_i64().unwrap();
    let begun = json!({"node": "n1", "database_id": "d", "export_id": "export-x", "from": high + 1, "through": high + 1,
                       "state": "begun", "began_at": "2026-12-01T00:00:00Z"});
    std::fs::write(exports.join(format!("{:020}.json", high + 1)), begun.to_string()).unwrap();
    let (code, with_begun) = check();
    assert_eq!(code, Some(0), "an unfinished export alone is no problem: {with_begun:#}");
    assert_eq!(with_begun["nodes"][0]["unfinished"], json!([[high + 1, high + 1, "export-x"]]));

    // The second export's record is lost: its numbers are a gap, and its
    // files are listed by no finished export.
    let mut records: Vec<PathBuf> =
        std::fs::read_dir(&exports).unwrap().flatten().map(|e| e.path()).collect();
    records.sort();
    let second: Value = serde_json::from_str(&std::fs::read_to_string(&records[1]).unwrap()).unwrap();
    std::fs::remove_file(&records[1]).unwrap();
    let (code, gapped) = check();
    assert_eq!(code, Some(4), "{gapped:#}");
    assert_eq!(gapped["nodes"][0]["gaps"], json!([[second["from"], second["through"]]]));
    assert_eq!(
        gapped["nodes"][0]["unlisted"].as_array().unwrap().len(),
        second["files"].as_array().unwrap().len()
    );
    let table = String::from_utf8(run(&["lake", "check", lake.to_str().unwrap()]).stdout).unwrap();
    assert!(table.contains(&format!("gap: numbers {} to {}", second["from"], second["through"])), "{table}");
}

/// A lake folder on a read-only file system, and on one that fills up
/// mid-export (tmpfs mounts in a namespace of their own): the export fails
/// naming what happened and leaves no staged file; `serve --lake` on the
/// read-only one refuses to start; once there is room the same export
/// completes and the lake holds every attempt once.
#[test]
fn a_read_only_or_full_lake_folder_fails_an_export_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), "a", "overnight-529-storm", 20_000, 41);
    let stored = report_of(&db);
    let mount = dir.path().join("mnt");
    std::fs::create_dir(&mount).unwrap();
    let script = r#"
        set -u
        bin="$1"; db="$2"; mnt="$3"
        mount -t tmpfs -o ro,size=4m tmpfs "$mnt" || exit 97
        echo "== read-only export"; "$bin" export --db "$db" --lake "$mnt/lake" --node-id n1; echo "rc=$?"
        echo "== read-only serve"; timeout 20 "$bin" serve --db "$db" --listen 127.0.0.1:0 --otlp-grpc 127.0.0.1:0 --lake "$mnt/lake" --node-id n1; echo "rc=$?"
        umount "$mnt"
        mount -t tmpfs -o size=256k tmpfs "$mnt" || exit 97
        echo "== full export"; "$bin" export --db "$db" --lake "$mnt/lake" --node-id n1; echo "rc=$?"
        echo "== staged"; find "$mnt/lake" -name '.*tmp' | wc -l
        echo "== check"; "$bin" lake check "$mnt/lake" --format json; echo "rc=$?"
        mount -o remount,size=64m "$mnt"
        echo "== export again"; "$bin" export --db "$db" --lake "$mnt/lake" --node-id n1; echo "rc=$?"
        echo "== report"; "$bin" report --lake "$mnt/lake" --format json --no-audit; echo "rc=$?"
        echo "== check again"; "$bin" lake check "$mnt/lake" --format json; echo "rc=$?"
    "#;
    let out = Command::new("unshare")
        .args(["--mount", "--map-root-user", "--propagation", "private", "sh", "-c", script, "sh", BIN])
        .arg(&db)
        .arg(&mount)
        .output()
        .expect("unshare (util-linux) runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_ne!(out.status.code(), Some(97), "tmpfs could not be mounted: {stderr}");
    let section = |name: &str| -> String {
        let start =
            stdout.find(&format!("== {name}\n")).unwrap_or_else(|| panic!("{name}: {stdout}\n{stderr}"));
        let rest = &stdout[start + name.len() + 4..];
        rest[..rest.find("\n== ").unwrap_or(rest.len())].to_string()
    };
    assert!(section("read-only export").trim_end().ends_with("rc=1"), "{stdout}\n{stderr}");
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    assert!(
        section("read-only serve").trim_end().ends_with("rc=1"),
        "serve refuses to start: {stdout}\n{stderr}"
    );
    assert!(section("full export").trim_end().ends_with("rc=1"), "{stdout}\n{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert_eq!(section("staged").trim(), "0", "no staged file is left behind");
    let check = section("check");
    let json_end = check.rfind('}').unwrap() + 1;
    let checked: Value = serde_json::from_str(&check[..json_end]).unwrap();
    assert_eq!(checked["bad"], json!([]), "a full disk leaves no bad file: {checked:#}");
    assert!(section("export again").trim_end().ends_with("rc=0"), "{stdout}\n{stderr}");
    let report = section("report");
    let report: Value = serde_json::from_str(&report[..report.rfind('}').unwrap() + 1]).unwrap();
    assert_eq!(report["attempts"]["total"], stored["attempts"]["total"], "every attempt once");
    assert_eq!(report["lake"]["copies_read"], stored["attempts"]["total"]);
    assert!(section("check again").trim_end().ends_with("rc=0"), "{stdout}");
}

/// A lake an earlier version wrote, before the billing account, service
/// tier and rate-limit headroom were lake columns: the next export grows
/// its manifest by them
/// (marked `added`), the earlier files stay good and read them as NULL,
/// and `report --lake`, `lake check`, ClickHouse and Spark count every
/// attempt. A lake whose columns differ otherwise is refused before a file
/// is written.
#[test]
fn a_lake_of_an_earlier_version_grows_the_added_columns_and_reads_whole() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let db = database(dir.path(), "a", "rate-limit-fallback", 80, 41);
    assert!(export(&db, &lake, "n1", &[]).status.success());
    let manifest_path = lake.join("_lake.json");
    let read_manifest =
        || -> Value { serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap() };
    let column_names = |manifest: &Value| -> Vec<String> {
        manifest["schema"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    };
    let grown = read_manifest();
    let names = column_names(&grown);
    let added = attempt_ledger::store::ADDED_LAKE_COLUMNS;
    assert_eq!(names[names.len() - added.len() - 1], "ingested_at");
    assert_eq!(names[names.len() - added.len()..], added);

    // The earlier version's lake: its manifest and files without the added columns.
    let mut earlier = grown.clone();
    earlier["schema"].as_array_mut().unwrap().retain(|c| c["added"] != true);
    assert_eq!(earlier["schema"].as_array().unwrap().len(), names.len() - added.len());
    std::fs::write(&manifest_path, serde_json::to_string_pretty(&earlier).unwrap()).unwrap();
    let conn = duckdb::Connection::open_in_memory().unwrap();
    for file in parquet_files(&lake) {
        let source = file.display().to_string();
        let metadata: Vec<String> = conn
            .prepare(&format!("SELECT key::VARCHAR, value::VARCHAR FROM parquet_kv_metadata('{source}')"))
            .unwrap()
            .query_map([], |r| Ok(format!("{}: '{}'", r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let staged = format!("{source}.old");
        conn.execute_batch(&format!(
            "COPY (SELECT * EXCLUDE ({}) FROM read_parquet('{source}', hive_partitioning = false)) \
             TO '{staged}' (FORMAT parquet, KV_METADATA {{{}}});",
            added.join(", "),
            metadata.join(", ")
        ))
        .unwrap();
        std::fs::rename(&staged, &file).unwrap();
    }
    let checked = run(&["lake", "check", lake.to_str().unwrap(), "--format", "json"]);
    assert_eq!(
        checked.status.code(),
        Some(0),
        "the earlier lake is whole: {}",
        String::from_utf8_lossy(&checked.stdout)
    );
    let script = format!("{}/scripts/lake-report.py", env!("CARGO_MANIFEST_DIR"));
    let lake_report = || -> Value {
        let args = ["report", "--lake", lake.to_str().unwrap(), "--no-audit", "--format", "json"];
        serde_json::from_str(&ok(&args)).unwrap()
    };
    let engines_agree = |want: &Value| {
        for engine in ["clickhouse", "spark"] {
            let out =
                python_lake().args([&script, "--engine", engine, lake.to_str().unwrap()]).output().unwrap();
            assert!(out.status.success(), "{engine}: {}", String::from_utf8_lossy(&out.stderr));
            let report: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_same(&sections(&report), &sections(want), engine);
        }
    };
    // No file holds an added column yet: the engines read it as NULL too.
    engines_agree(&lake_report());

    // Attempts with a billing account and a tier, exported by this version.
    let records = dir.path().join("billed.jsonl");
    let record = |id: &str| {
        json!({"workflow_id": format!("billed-{id}"), "attempt_id": id, "started_at": "2026-11-20T10:00:00Z",
               "provider": "openai", "model": "gpt-4o-mini", "status": "ok", "input_tokens": 10,
               "output_tokens": 20, "reasoning_output_tokens": 8, "billing_account": "proj_billed",
               "service_tier": "flex"})
        .to_string()
    };
    std::fs::write(&records, format!("{}\n{}\n", record("b1"), record("b2"))).unwrap();
    ok(&["ingest", "--db", db.to_str().unwrap(), records.to_str().unwrap()]);
    let out = export(&db, &lake, "n1", &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let after = read_manifest();
    assert_eq!(column_names(&after), names, "the manifest grew the added columns");
    assert_eq!(after["lake_id"], grown["lake_id"]);

    let checked = run(&["lake", "check", lake.to_str().unwrap(), "--format", "json"]);
    assert_eq!(checked.status.code(), Some(0), "{}", String::from_utf8_lossy(&checked.stdout));
    let total = attempts_of(&db);
    let from_lake = lake_report();
    assert_eq!(from_lake["attempts"]["total"].as_u64(), Some(total));
    assert_eq!(from_lake["tokens"]["total"]["reasoning_output"], 16, "the new files' reasoning tokens");
    let glob = lake.join("attempts/*/*/*.parquet").display().to_string();
    let (rows, billed): (i64, i64) = conn
        .query_row(
            &format!(
                "SELECT count(*), count(*) FILTER (WHERE billing_account = 'proj_billed' AND service_tier = 'flex')
                 FROM read_parquet('{glob}', union_by_name = true)"
            ),
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((rows as u64, billed), (total, 2));
    engines_agree(&from_lake);

    // Columns that are not an earlier or later version's: refused, nothing written.
    let mut other = after.clone();
    other["schema"][3]["type"] = json!("DOUBLE");
    std::fs::write(&manifest_path, serde_json::to_string_pretty(&other).unwrap()).unwrap();
    let files_before = parquet_files(&lake);
    ingest(&db, dir.path(), "naive-retries", 10, 42);
    let refused = export(&db, &lake, "n1", &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("are not what this attempt-ledger writes") && stderr.contains("column 4"),
        "{stderr}"
    );
    assert_eq!(parquet_files(&lake), files_before);
}
