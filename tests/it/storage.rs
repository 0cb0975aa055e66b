//! Storage faults: a full disk answers 503 with Retry-After and a
//! not-ready `/readyz`, loses nothing acknowledged, and recovers when space
//! comes back; a damaged write-ahead log stops every command at open with
//! what to do and exit status 65.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::FIXTURE;

fn records(batch: usize, count: usize) -> String {
    (0..count)
        .map(|i| {
            format!(
                "{{\"workflow_id\":\"b{batch}-{i}\",\"workflow\":\"batch-{batch}\",\"started_at\":{},\"provider\":\"openai\",\
                 \"model\":\"gpt-4o-mini\",\"status\":\"ok\",\"input_tokens\":{i},\"note\":\"{}\"}}\n",
                1_795_831_200_000u64 + i as u64,
                "x".repeat(200)
            )
        })
        .collect()
}

/// `serve` on a 32 MiB tmpfs of its own (a private mount namespace, so no
/// root is needed where user namespaces are allowed), nearly filled by a
/// ballast file. Deleting the ballast through `/proc/PID/root` frees space.
#[test]
fn a_full_disk_refuses_writes_retryably_and_recovers_when_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("small-disk");
    std::fs::create_dir(&mount).unwrap();
    let script = r#"mount -t tmpfs -o size=32m tmpfs "$0" && fallocate -l 26m "$0/ballast" && exec "$@""#;
    let mut child = Command::new("unshare")
        .args(["--mount", "--map-root-user", "--propagation", "private", "sh", "-c", script])
        .arg(&mount)
        .arg(env!("CARGO_BIN_EXE_attempt-ledger"))
        .args(["serve", "--listen", "127.0.0.1:0", "--otlp-grpc", "127.0.0.1:0", "--db"])
        .arg(mount.join("ledger.duckdb"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("unshare (util-linux) runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.contains("http="), "serve did not start on the small disk: {line:?}");
    let http = line.split_whitespace().find_map(|w| w.strip_prefix("http=")).unwrap().to_string();
    let ballast: PathBuf = Path::new("/proc")
        .join(child.id().to_string())
        .join("root")
        .join(mount.strip_prefix("/").unwrap())
        .join("ballast");
    assert!(ballast.exists(), "the ballast is visible at {}", ballast.display());

    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let post = |batch: usize| {
        let response = agent
            .post(&format!("http://{http}/v1/attempts"))
            .header("Content-Type", "application/x-ndjson")
            .send(records(batch, 4000).as_bytes())
            .unwrap();
        let retry_after = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
        (response.status().as_u16(), retry_after)
    };
    let ready = || {
        let mut response = agent.get(&format!("http://{http}/readyz")).call().unwrap();
        (response.status().as_u16(), response.body_mut().read_to_string().unwrap())
    };
    let mut acknowledged = 0;
    let refused = loop {
        match post(acknowledged) {
            (200, _) => acknowledged += 1,
            (status, retry_after) => {
                assert_eq!(
                    (status, retry_after.as_deref()),
                    (503, Some("1")),
                    "after {acknowledged} batches"
                );
                break acknowledged;
            }
        }
        assert!(acknowledged < 200, "6 MiB of free space never filled");
    };
    assert!(acknowledged > 0, "the first batch fits");
    let (status, reason) = ready();
    assert_eq!(status, 503);
    assert!(reason.contains("last write to the database failed"), "{reason}");
    // The refused batch is counted, not only logged.
    let mut metrics = agent.get(&format!("http://{http}/metrics")).call().unwrap();
    let metrics = metrics.body_mut().read_to_string().unwrap();
    let failed = metrics
        .lines()
        .find_map(|l| l.strip_prefix("attempt_ledger_ingest_batches_failed_total "))
        .and_then(|v| v.trim().parse::<f64>().ok());
    assert!(failed >= Some(1.0), "failed batches: {failed:?}");

    // Space comes back: the writer's probe turns /readyz ready with no
    // client writing, and the refused batch can be sent again.
    std::fs::remove_file(&ballast).unwrap();
    crate::wait_for("/readyz to say ready", Duration::from_secs(20), || ready().0 == 200);
    assert_eq!(post(refused).0, 200);
    acknowledged += 1;

    let mut response = agent.get(&format!("http://{http}/api/v1/report")).call().unwrap();
    let report: Value = serde_json::from_slice(&response.body_mut().read_to_vec().unwrap()).unwrap();
    assert_eq!(report["attempts"]["total"], (acknowledged * 4000) as u64, "every acknowledged record, once");
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(child.wait().unwrap().success());
}

/// A log with a damaged entry (bytes flipped in a log that holds committed
/// transactions): `report`, `ingest` and `serve` all stop at open with the
/// `mv` that fixes it and exit 65, and the database opens once it is done.
#[test]
fn a_damaged_write_ahead_log_is_reported_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.duckdb");
    let wal = dir.path().join("w.duckdb.wal");
    {
        // Killed after an acknowledged write: the log holds it, unreplayed
        // (closing would have checkpointed it into the database file).
        let mut service = crate::service::ServiceProcess::start(&db, &[]);
        let (status, _, _) = service.post("/v1/attempts", "application/x-ndjson", None, FIXTURE.as_bytes());
        assert_eq!(status, 200);
        service.child.kill().unwrap();
        service.child.wait().unwrap();
    }
    let mut log = std::fs::read(&wal).unwrap();
    assert!(log.len() > 1000, "the log holds the batch: {} bytes", log.len());
    let middle = log.len() / 2;
    log[middle..middle + 32].iter_mut().for_each(|b| *b ^= 0xff);
    std::fs::write(&wal, &log).unwrap();

    let bin = env!("CARGO_BIN_EXE_attempt-ledger");
    let db_arg = db.to_str().unwrap();
    for args in [
        vec!["report", "--db", db_arg],
        vec!["ingest", "--db", db_arg, "-"],
        vec!["serve", "--db", db_arg, "--listen", "127.0.0.1:0", "--otlp-grpc", "127.0.0.1:0"],
    ] {
        let out = Command::new(bin).args(&args).stdin(Stdio::null()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(65), "{args:?}: {stderr}");
        assert!(stderr.contains("write-ahead log") && stderr.contains("is damaged"), "{stderr}");
        assert!(stderr.contains(&format!("mv {} {}.damaged", wal.display(), wal.display())), "{stderr}");
    }
    std::fs::rename(&wal, dir.path().join("w.duckdb.wal.damaged")).unwrap();
    let out = Command::new(bin).args(["report", "--db", db_arg, "--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
