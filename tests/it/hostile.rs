//! The hostile-input sweep over the surfaces added since the last round:
//! the address file the read commands trust beside a running `serve`, the
//! files and values `tune`, `report` and `serve` read, and the lake flags
//! of `export` and `serve`. Each case names what a user or another local
//! process could do, and what must happen instead of harm.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use crate::FIXTURE;
use crate::service::ServiceProcess;

const BIN: &str = env!("CARGO_BIN_EXE_attempt-ledger");
const READ_TOKEN: &str = "read-secret-0123456789";

fn run_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(BIN).args(args).envs(env.iter().copied()).current_dir(dir).output().unwrap()
}

/// A database holding the fixture's records, and the file they came from.
fn fixture_db(dir: &Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let (db, input) = (dir.join(name), dir.join("in.jsonl"));
    std::fs::write(&input, FIXTURE).unwrap();
    let out = run_in(dir, &["ingest", "--db", db.to_str().unwrap(), input.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    (db, input)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What the test itself sends the trap last.
const SENTINEL: &[u8] = b"the test's own last connection";

/// A listener that counts the connections it gets and keeps their bytes:
/// where a forged address file points.
fn trap() -> (String, Arc<AtomicUsize>, Arc<std::sync::Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let (hits, seen) = (Arc::new(AtomicUsize::new(0)), Arc::new(std::sync::Mutex::new(Vec::new())));
    let (count, keep) = (hits.clone(), seen.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            let mut stream = stream;
            let _ = stream.set_read_timeout(Some(std::time::Duration::from_millis(500)));
            let mut buf = [0u8; 4096];
            if let Ok(n) = stream.read(&mut buf) {
                keep.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        }
    });
    (address, hits, seen)
}

/// Another local user (or a stale file) puts an address beside the
/// database that `serve` holds: the read commands must never send it the
/// token, nor print what it answers. A file naming the holder's pid but
/// another listener is refused; one naming another pid is ignored (the
/// database's lock is reported); one that is not an address file is
/// refused; the true one is asked.
#[test]
fn a_forged_or_stale_address_file_never_receives_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("attempt-ledger.duckdb");
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, FIXTURE).unwrap();
    assert!(run_in(dir.path(), &["ingest", "--no-progress", input.to_str().unwrap()], &[]).status.success());
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("read {READ_TOKEN}\n")).unwrap();
    let service = ServiceProcess::start(&db, &["--tokens", tokens.to_str().unwrap()]);
    let address_file = dir.path().join("attempt-ledger.duckdb.serve");
    let pid = service.child.id();
    let (trap_address, hits, seen) = trap();
    let env = [("ATTEMPT_LEDGER_TOKEN", READ_TOKEN)];
    let report = || run_in(dir.path(), &["report", "--format", "json"], &env);

    // The holder's pid, an address it does not listen at.
    std::fs::write(&address_file, json!({"http": trap_address, "pid": pid, "tls": false}).to_string())
        .unwrap();
    let out = report();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("has no socket listening there"), "{}", text(&out.stderr));
    // Another process's pid (a file a killed `serve` left): not asked.
    std::fs::write(&address_file, json!({"http": trap_address, "pid": 1, "tls": false}).to_string()).unwrap();
    let out = report();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("is in use by"), "{}", text(&out.stderr));
    // Not an address file at all (and too large to be one).
    std::fs::write(&address_file, "x".repeat(1 << 20)).unwrap();
    let out = report();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("is not an address file"), "{}", text(&out.stderr));
    // The trap takes connections in the order they came: once a last one of
    // ours has been read, any the commands made were counted before it.
    std::net::TcpStream::connect(&trap_address).unwrap().write_all(SENTINEL).unwrap();
    crate::wait_for("the trap to read our own connection", std::time::Duration::from_secs(10), || {
        seen.lock().unwrap().ends_with(SENTINEL)
    });
    assert_eq!(
        hits.load(Ordering::SeqCst) - 1,
        0,
        "nothing reached the forged address: {:?}",
        text(&seen.lock().unwrap())
    );

    // The same refusal over HTTP for tune's `set=` (a URL can carry a
    // line break as well as a command line can).
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut injected = agent
        .get(&format!("{}/api/v1/tune?set=max_total_attempts%3D3%0A%5B%5Bworkflow%5D%5D", service.http))
        .header("Authorization", &format!("Bearer {READ_TOKEN}"))
        .call()
        .unwrap();
    assert_eq!(injected.status().as_u16(), 400);
    let body = injected.body_mut().read_to_string().unwrap();
    assert!(body.contains("one line without control characters"), "{body}");

    // The true address: asked, with the token.
    let http = service.http.trim_start_matches("http://").to_string();
    std::fs::write(&address_file, json!({"http": http, "pid": pid, "tls": false}).to_string()).unwrap();
    let out = report();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(&format!("held by `serve` (pid {pid})")), "{}", text(&out.stderr));
    assert!(service.terminate().success());
}

/// Files a command is told to read that are devices, folders or huge: each
/// refused at start, naming the file, never read without end.
#[test]
fn files_that_are_devices_folders_or_huge_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let (db, input) = fixture_db(dir.path(), "f.duckdb");
    let huge = dir.path().join("huge.toml");
    std::fs::write(&huge, "# padding\n".repeat(2 << 20)).unwrap();
    let db = db.to_str().unwrap();
    for path in ["/dev/zero", "/", huge.to_str().unwrap()] {
        for args in [
            vec!["tune", "--db", db, "--policy", path],
            vec!["audit", "--db", db, "--policy", path],
            vec!["report", "--db", db, "--prices", path],
            vec!["ingest", "--db", db, "--providers", path, input.to_str().unwrap()],
            vec!["alerts", "--db", db, "--check", "--rules", path],
            vec![
                "serve",
                "--db",
                db,
                "--tokens",
                path,
                "--listen",
                "127.0.0.1:0",
                "--otlp-grpc",
                "127.0.0.1:0",
            ],
        ] {
            let out = Command::new(BIN).args(&args).output().unwrap();
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
            assert!(stderr.contains(path), "{args:?} names the file: {stderr}");
            assert!(
                stderr.contains("more than 16 MiB") || stderr.contains("folder, not a file"),
                "{args:?}: {stderr}"
            );
        }
    }
}

/// `tune --set` values that would reach past their own line, keys given
/// twice, and values no limit has: refused, naming the assignment.
#[test]
fn tune_set_refuses_injected_repeated_and_impossible_values() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = fixture_db(dir.path(), "t.duckdb");
    for (sets, says) in [
        (vec!["max_total_attempts=3\n[[workflow]]\nname = \"x\""], "one line without control characters"),
        (vec!["max_retries.sdk=2", "max_retries.sdk=5"], "is set twice"),
        (vec!["max_total_attempts=0"], "1 or more"),
        (vec!["max_elapsed_ms=-5"], "max_elapsed_ms"),
        (vec!["retry_budget=nan"], "retry_budget"),
        (vec!["max_retries.robot=1"], "robot"),
    ] {
        let mut args = vec!["tune", "--db", db.to_str().unwrap()];
        for set in &sets {
            args.extend(["--set", set]);
        }
        let out = Command::new(BIN).args(&args).output().unwrap();
        let stderr = text(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{sets:?} was taken");
        assert!(stderr.contains(says), "{sets:?}: {stderr}");
    }
}

/// The lake flags: a node id without a lake, a lake that is a file, bucket
/// counts out of range or for an existing lake: refused at start.
#[test]
fn lake_flags_are_checked_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = fixture_db(dir.path(), "l.duckdb");
    let db = db.to_str().unwrap();
    let serve = |extra: &[&str]| {
        let mut args = vec!["serve", "--db", db, "--listen", "127.0.0.1:0", "--otlp-grpc", "127.0.0.1:0"];
        args.extend(extra);
        Command::new(BIN).args(&args).output().unwrap()
    };
    let out = serve(&["--node-id", "n1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--node-id names this database in a lake: it needs --lake"),
        "{}",
        text(&out.stderr)
    );
    for flag in [&["--lake-buckets", "4"][..], &["--replace-node"], &["--lake-interval", "1m"]] {
        assert_eq!(serve(flag).status.code(), Some(2), "{flag:?} without --lake");
    }
    let a_file = dir.path().join("not-a-folder");
    std::fs::write(&a_file, "x").unwrap();
    let out =
        Command::new(BIN).args(["export", "--db", db, "--lake", a_file.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("is a file, not a folder"), "{}", text(&out.stderr));
    let out = serve(&["--lake", a_file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "serve refuses to start: {}", text(&out.stderr));
    assert!(text(&out.stderr).contains("is a file, not a folder"), "{}", text(&out.stderr));
    let lake = dir.path().join("lake");
    for buckets in ["0", "1025", "x"] {
        let out = Command::new(BIN)
            .args(["export", "--db", db, "--lake", lake.to_str().unwrap(), "--lake-buckets", buckets])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "--lake-buckets {buckets}");
    }
    assert!(
        Command::new(BIN)
            .args(["export", "--db", db, "--lake", lake.to_str().unwrap()])
            .status()
            .unwrap()
            .success()
    );
    let out = Command::new(BIN)
        .args(["export", "--db", db, "--lake", lake.to_str().unwrap(), "--lake-buckets", "8"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("applies only to a new lake"), "{}", text(&out.stderr));
    // A lake folder with someone else's manifest, and one of an older format.
    std::fs::write(lake.join("_lake.json"), "{\"format_version\": 1}").unwrap();
    let out = Command::new(BIN).args(["report", "--lake", lake.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("export each node to a new lake"), "{}", text(&out.stderr));
}
