//! The attempt lake on object storage: a local S3 server that enforces
//! conditional writes as S3 does (moto's standalone server, pinned in
//! tests/python/s3/requirements.txt), written by several nodes at once,
//! by `serve`, and by an export killed mid-way; read by `report --lake`
//! and `lake check` from the same URL.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::lake::{assert_same, sections};
use crate::lake_kit::{BIN, attempts_of, database, ingest, report_of};
use crate::service::ServiceProcess;

/// moto's S3 server on a port of its own, with one bucket; stopped when
/// dropped.
pub(crate) struct S3Server {
    child: Child,
    endpoint: String,
}

impl S3Server {
    pub(crate) fn start(bucket: &str) -> S3Server {
        let python = std::env::var("ATTEMPT_LEDGER_TEST_PYTHON_S3")
            .expect("ATTEMPT_LEDGER_TEST_PYTHON_S3: run the tests with scripts/test.sh, which installs moto");
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(python)
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = S3Server { child, endpoint: format!("http://127.0.0.1:{port}") };
        let began = Instant::now();
        // CreateBucket: moto takes it unsigned.
        while ureq::put(&format!("{}/{bucket}", server.endpoint)).send_empty().is_err() {
            assert!(began.elapsed() < Duration::from_secs(60), "moto's S3 server did not start");
            std::thread::sleep(Duration::from_millis(200));
        }
        server
    }

    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The standard variables an S3 client reads, pointed at this server.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "attempt-ledger-test".into()),
            ("AWS_SECRET_ACCESS_KEY", "attempt-ledger-test".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command.args(args).envs(self.env());
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    fn export(&self, db: &Path, lake: &str, node: &str) -> Command {
        self.command(&["export", "--db", db.to_str().unwrap(), "--lake", lake, "--node-id", node])
    }

    fn report(&self, lake: &str, extra: &[&str]) -> Value {
        let mut args = vec!["report", "--lake", lake, "--format", "json", "--no-audit"];
        args.extend_from_slice(extra);
        serde_json::from_str(&self.ok(&args)).unwrap()
    }

    /// `lake check` of `lake`: its exit code and its JSON.
    fn check(&self, lake: &str) -> (Option<i32>, Value) {
        let out = self.run(&["lake", "check", lake, "--format", "json"]);
        let json = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("lake check: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), json)
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A database of one scenario, its records also ingested into `reference`
/// (one node that received everything).
fn node_db(dir: &Path, name: &str, scenario: &str, workflows: u32, seed: u32, reference: &Path) -> PathBuf {
    let db = database(dir, name, scenario, workflows, seed);
    let file = dir.join(format!("{scenario}-{seed}.jsonl"));
    crate::lake_kit::ok(&["ingest", "--db", reference.to_str().unwrap(), file.to_str().unwrap()]);
    db
}

#[test]
fn nodes_exporting_to_s3_at_once_make_one_lake_that_reads_as_one_node() {
    let s3 = S3Server::start("lake");
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference.duckdb");
    let dbs = [
        node_db(dir.path(), "a", "rate-limit-fallback", 150, 21, &reference),
        node_db(dir.path(), "b", "gateway-reroute", 120, 22, &reference),
        node_db(dir.path(), "c", "naive-retries", 60, 23, &reference),
    ];
    let lake = "s3://lake/teams/attempts";
    // Three nodes create the lake and claim their ids at the same moment.
    let children: Vec<Child> = dbs
        .iter()
        .zip(["a", "b", "c"])
        .map(|(db, node)| {
            s3.export(db, lake, node).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    // More traffic to node a, exported after: a second export of a node.
    ingest(&dbs[0], dir.path(), "overnight-529-storm", 80, 24);
    let file = dir.path().join("overnight-529-storm-24.jsonl");
    crate::lake_kit::ok(&["ingest", "--db", reference.to_str().unwrap(), file.to_str().unwrap()]);
    let out = s3.export(&dbs[0], lake, "a").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let again = s3.export(&dbs[0], lake, "a").output().unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("already holds every attempt"));

    let want = report_of(&reference);
    let got = s3.report(lake, &[]);
    assert_same(&sections(&got), &sections(&want), "report --lake s3://");
    let total = attempts_of(&reference);
    assert_eq!(got["lake"]["attempts"], total);
    assert_eq!(got["lake"]["copies_read"], total, "each attempt once in the lake");
    let every = s3.report(lake, &["--every-section"]);
    let mut want_every = want.clone();
    want_every.as_object_mut().unwrap().remove("lake");
    let mut every_sections = every.clone();
    every_sections.as_object_mut().unwrap().remove("lake");
    assert_same(&every_sections, &want_every, "report --lake s3:// --every-section");

    // A window and a workflow filter read the same as the node.
    let filter = ["--workflow", "chat-interactive"];
    let node = &reference.to_str().unwrap();
    let want_filtered: Value = serde_json::from_str(&crate::lake_kit::ok(&[
        "report",
        "--db",
        node,
        "--format",
        "json",
        "--no-audit",
        filter[0],
        filter[1],
    ]))
    .unwrap();
    assert_same(
        &sections(&s3.report(lake, &filter)),
        &sections(&want_filtered),
        "report --lake s3:// --workflow",
    );

    let (code, check) = s3.check(lake);
    assert_eq!(code, Some(0), "{check:#}");
    let nodes: Vec<&str> =
        check["nodes"].as_array().unwrap().iter().map(|n| n["node"].as_str().unwrap()).collect();
    assert_eq!(nodes, ["a", "b", "c"]);
    assert_eq!(check["nodes"][0]["exports"], 2);
    let exported: u64 =
        check["nodes"].as_array().unwrap().iter().map(|n| n["attempts"].as_u64().unwrap()).sum();
    assert_eq!(exported, total);
    assert!(check["bad"].as_array().unwrap().is_empty());
    // No probe object or staged file is left in the bucket.
    let listing = ureq::get(&format!("{}/lake?list-type=2&prefix=teams/", s3.endpoint()))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(!listing.contains("_probe"), "{listing}");
    assert!(listing.contains("teams/attempts/_lake.json"), "{listing}");
}

#[test]
fn a_second_database_under_a_taken_node_id_is_refused_by_the_bucket() {
    let s3 = S3Server::start("lake");
    let dir = tempfile::tempdir().unwrap();
    let first = database(dir.path(), "first", "rate-limit-fallback", 40, 31);
    let second = database(dir.path(), "second", "gateway-reroute", 40, 32);
    let lake = "s3://lake/shared";
    let out = s3.export(&first, lake, "n1").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = s3.export(&second, lake, "n1").output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("node id `n1` of the lake s3://lake/shared is bound to another database"),
        "{stderr}"
    );
    assert!(stderr.contains("--replace-node"), "{stderr}");
    // Nothing of the refused database reached the lake.
    let got = s3.report(lake, &[]);
    assert_eq!(got["lake"]["attempts"], attempts_of(&first));
    // serve refuses it too, before it opens a port.
    let db = second.to_str().unwrap();
    let mut serve = s3
        .command(&["serve", "--db", db, "--lake", lake, "--node-id", "n1"])
        .args(["--listen", "127.0.0.1:0", "--otlp-grpc", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let began = Instant::now();
    while serve.try_wait().unwrap().is_none() {
        if began.elapsed() > Duration::from_secs(30) {
            serve.kill().unwrap();
            panic!("serve started under a taken node id");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = serve.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is bound to another database"));
}

#[test]
fn a_store_that_does_not_enforce_conditional_writes_is_refused_by_name() {
    let s3 = S3Server::start("lake");
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), "a", "rate-limit-fallback", 20, 41);
    // The S3 client told the store has no conditional writes (a store
    // that ignores If-None-Match and If-Match is refused the same way).
    let out =
        s3.export(&db, "s3://lake/unsafe", "n1").env("AWS_CONDITIONAL_PUT", "disabled").output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the lake's store s3://lake/unsafe does not enforce conditional writes"),
        "{stderr}"
    );
    // Nothing was written: the lake is still missing.
    let out = s3.run(&["report", "--lake", "s3://lake/unsafe"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no attempt lake at s3://lake/unsafe"));
    // A location that is not a lake's is refused when the flags are read.
    let out = s3.run(&["report", "--lake", "ftp://host/lake"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a lake location"), "{out:?}");
    let out = s3.run(&["report", "--lake", "s3:///prefix"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("names no bucket"), "{out:?}");
}

/// kill -9 at later and later moments, until one lands mid-way (an export
/// begun and not finished); the next export does it again, and the bucket
/// holds each attempt once.
#[test]
fn an_export_to_s3_killed_mid_way_is_done_again_and_counts_each_attempt_once() {
    let s3 = S3Server::start("lake");
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), "a", "overnight-529-storm", 20000, 51);
    let lake = "s3://lake/killed";
    let mut mid_way = 0;
    // 64 buckets: as many files, uploaded one after another, so the time
    // between the first upload and the record is many steps wide.
    for delay_ms in (100..6000u64).step_by(80) {
        let mut child = s3
            .export(&db, lake, "a")
            .args(["--lake-buckets", "64"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let running = child.try_wait().unwrap().is_none();
        if running {
            Command::new("kill").args(["-KILL", &child.id().to_string()]).status().unwrap();
        }
        child.wait().unwrap();
        if !running {
            break;
        }
        // A kill before the lake's manifest leaves no lake to check yet.
        let out = s3.run(&["lake", "check", lake, "--format", "json"]);
        let Ok(check) = serde_json::from_slice::<Value>(&out.stdout) else { continue };
        let unfinished = check["nodes"][0]["unfinished"].as_array().is_some_and(|u| !u.is_empty());
        let unlisted = check["nodes"][0]["unlisted"].as_array().is_some_and(|u| !u.is_empty());
        if unfinished && unlisted {
            mid_way += 1;
        }
        if mid_way >= 2 {
            break;
        }
    }
    assert!(mid_way > 0, "no kill landed between a file's upload and the export's record");
    let out = s3.export(&db, lake, "a").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (code, check) = s3.check(lake);
    assert_eq!(code, Some(0), "{check:#}");
    assert!(check["nodes"][0]["unfinished"].as_array().unwrap().is_empty());
    let total = attempts_of(&db);
    let got = s3.report(lake, &[]);
    assert_eq!(got["lake"]["copies_read"], total, "each attempt once, no copy of a killed export's");
    assert_same(&sections(&got), &sections(&report_of(&db)), "report --lake s3:// after the killed exports");
}

#[test]
fn serve_exports_to_s3_as_it_runs() {
    let s3 = S3Server::start("lake");
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), "a", "gateway-reroute", 100, 61);
    let lake = "s3://lake/served";
    let envs = s3.env();
    let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let service = ServiceProcess::start_with_env(
        &db,
        &["--lake", lake, "--node-id", "s1", "--lake-interval", "1s"],
        &envs,
    );
    let want = attempts_of(&db);
    let began = Instant::now();
    loop {
        let out = s3.run(&["report", "--lake", lake, "--format", "json", "--no-audit"]);
        let done = out.status.success()
            && serde_json::from_slice::<Value>(&out.stdout).is_ok_and(|r| r["lake"]["attempts"] == want);
        if done {
            break;
        }
        assert!(began.elapsed() < Duration::from_secs(60), "serve did not export to the bucket");
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(service.terminate().success());
    assert_same(&sections(&s3.report(lake, &[])), &sections(&report_of(&db)), "report --lake after serve");
}
