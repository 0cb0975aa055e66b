//! The attempt lake committed as an Apache Iceberg table: nodes exporting
//! at once to one table through a PostgreSQL catalog (the JDBC catalog's
//! schema, a real PostgreSQL started here), in a folder and in a local S3
//! server; read back by `report --lake --catalog` and by pyiceberg (pinned
//! in tests/python/iceberg/requirements.txt), which reads the files by
//! their field ids.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::lake::{assert_same, sections};
use crate::lake_kit::{BIN, attempts_of, database, ingest, report_of};
use crate::lake_s3::S3Server;

/// A PostgreSQL server of Debian's packages in a folder of its own, on a
/// port of its own; stopped when dropped.
pub(crate) struct Postgres {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Postgres {
    pub(crate) fn start() -> Postgres {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .expect("PostgreSQL's server: run the tests with scripts/test.sh, which installs it")
            .filter_map(|entry| entry.ok().map(|e| e.path().join("bin")))
            .filter(|bin| bin.join("postgres").exists())
            .max()
            .expect("no PostgreSQL server under /usr/lib/postgresql");
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        // PostgreSQL refuses to run as root: as root, it runs as `postgres`.
        let root = rustix::process::geteuid().is_root();
        if root {
            let status =
                Command::new("chown").args(["-R", "postgres:postgres"]).arg(dir.path()).status().unwrap();
            assert!(status.success());
        }
        let as_owner = |program: PathBuf| {
            if root {
                let mut command = Command::new("runuser");
                command.args(["-u", "postgres", "--"]).arg(program);
                command
            } else {
                Command::new(program)
            }
        };
        let out = as_owner(bin.join("initdb"))
            .args(["-A", "trust", "-U", "postgres", "--no-sync", "-D"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = as_owner(bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-k"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Postgres { child, port, _dir: dir };
        let began = Instant::now();
        while !Command::new(bin.join("pg_isready"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-q"])
            .status()
            .unwrap()
            .success()
        {
            assert!(began.elapsed() < Duration::from_secs(60), "PostgreSQL did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// The catalog's URI as attempt-ledger takes it.
    pub(crate) fn catalog(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The same database as SQLAlchemy (pyiceberg's SQL catalog) names it.
    fn sqlalchemy(&self) -> String {
        format!("postgresql+psycopg2://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // SIGTERM: a smart shutdown that takes the server's children too.
        let _ = Command::new("kill").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }
}

/// lakana-server's Iceberg REST catalog (pinned in
/// tests/python/rest_catalog/requirements.txt), its own metadata in SQLite
/// in a folder of its own, with one environment, `dev`, whose tables it
/// places under `storage`; stopped when dropped.
struct RestCatalog {
    child: Child,
    port: u16,
    token: String,
    _dir: tempfile::TempDir,
}

impl RestCatalog {
    fn start(storage: &Path) -> RestCatalog {
        let python = std::env::var("ATTEMPT_LEDGER_TEST_PYTHON_REST_CATALOG").expect(
            "ATTEMPT_LEDGER_TEST_PYTHON_REST_CATALOG: run the tests with scripts/test.sh, which installs \
             lakana-server",
        );
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let token_file = dir.path().join("token");
        let env = [
            ("LAKANA_DATABASE__URL", format!("sqlite:///{}", dir.path().join("catalog.sqlite").display())),
            ("LAKANA_HOST", "127.0.0.1".to_string()),
            ("LAKANA_PORT", port.to_string()),
            ("LAKANA_BOOTSTRAP_TOKEN_FILE", token_file.display().to_string()),
        ];
        let out = Command::new(&python)
            .args(["-m", "lakana_server", "migrate"])
            .envs(env.clone())
            .output()
            .unwrap();
        assert!(out.status.success(), "lakana-server migrate: {}", String::from_utf8_lossy(&out.stderr));
        let child = Command::new(&python)
            .args(["-m", "lakana_server"])
            .envs(env)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let began = Instant::now();
        let token = loop {
            if let Ok(token) = std::fs::read_to_string(&token_file)
                && ureq::get(&format!("http://127.0.0.1:{port}/v1/config"))
                    .header("Authorization", &format!("Bearer {}", token.trim()))
                    .call()
                    .is_ok()
            {
                break token.trim().to_string();
            }
            assert!(began.elapsed() < Duration::from_secs(60), "the REST catalog did not start");
            std::thread::sleep(Duration::from_millis(200));
        };
        let catalog = RestCatalog { child, port, token, _dir: dir };
        let environment = serde_json::json!({
            "name": "dev",
            "storage": {"scheme": "file", "root": format!("file://{}", storage.display())},
        });
        ureq::post(&format!("http://127.0.0.1:{port}/api/v1/environments"))
            .header("Authorization", &format!("Bearer {}", catalog.token))
            .send_json(&environment)
            .unwrap();
        catalog
    }

    /// `--catalog` for it.
    fn catalog(&self) -> String {
        format!("rest+http://127.0.0.1:{}?prefix=dev&token={}", self.port, self.token)
    }
}

impl Drop for RestCatalog {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where a test's nodes export: a folder, or a bucket of a local S3 server.
enum Store {
    Folder(PathBuf),
    S3(S3Server, String),
}

impl Store {
    fn lake(&self) -> String {
        match self {
            Store::Folder(path) => path.display().to_string(),
            Store::S3(_, url) => url.clone(),
        }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        match self {
            Store::Folder(_) => Vec::new(),
            Store::S3(server, _) => server.env(),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command.args(args).envs(self.env());
        command
    }

    fn export(&self, db: &Path, node: &str, catalog: &str) -> Command {
        let lake = self.lake();
        self.command(&[
            "export",
            "--db",
            db.to_str().unwrap(),
            "--lake",
            &lake,
            "--node-id",
            node,
            "--table-format",
            "iceberg",
            "--catalog",
            catalog,
        ])
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.command(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    fn report(&self, catalog: &str, extra: &[&str]) -> Value {
        let lake = self.lake();
        let mut args =
            vec!["report", "--lake", &lake, "--catalog", catalog, "--format", "json", "--no-audit"];
        args.extend_from_slice(extra);
        serde_json::from_str(&self.ok(&args)).unwrap()
    }

    /// pyiceberg's reading of the table: its rows, by node, and its layout.
    fn pyiceberg(&self, postgres: &Postgres) -> Value {
        let props = self.pyiceberg_props();
        let catalog = serde_json::json!({"type": "sql", "uri": postgres.sqlalchemy()});
        pyiceberg("ATTEMPT_LEDGER_TEST_PYTHON_ICEBERG", &catalog, "attempt_ledger.attempts", &props)
    }
}

/// pyiceberg's reading of `table` through `catalog` (its properties), run
/// by the interpreter `python_var` names.
fn pyiceberg(python_var: &str, catalog: &Value, table: &str, props: &Value) -> Value {
    let python = std::env::var(python_var).unwrap_or_else(|_| {
        panic!("{python_var}: run the tests with scripts/test.sh, which installs pyiceberg")
    });
    let out = Command::new(python)
        .args(["-c", PYICEBERG, &catalog.to_string(), table, &props.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "pyiceberg: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

const PYICEBERG: &str = r#"
import json, sys
import pyarrow.compute as pc
from pyiceberg.catalog import load_catalog
catalog, name, props = json.loads(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
table = load_catalog("attempt_ledger", **catalog, **props).load_table(name)
rows = table.scan().to_arrow()
by_node = rows.group_by("ingest_node").aggregate([("attempt_id", "count")])
print(json.dumps({
    "rows": rows.num_rows,
    "attempts": len(pc.unique(rows["attempt_id"])),
    "output_tokens": pc.sum(rows["output_tokens"]).as_py(),
    "by_node": dict(zip(by_node["ingest_node"].to_pylist(), by_node["attempt_id_count"].to_pylist())),
    "snapshots": [dict(s.summary.additional_properties)
                  | {"operation": str(s.summary.operation), "sequence": s.sequence_number}
                  for s in sorted(table.snapshots(), key=lambda s: s.sequence_number)],
    "partition": [[f.name, str(f.transform)] for f in table.spec().fields],
    "properties": dict(table.properties),
    "field_ids": {f.name: f.field_id for f in table.schema().fields},
}))
"#;

/// A database of one scenario, its records also ingested into `reference`.
fn node_db(dir: &Path, name: &str, scenario: &str, workflows: u32, seed: u32, reference: &Path) -> PathBuf {
    let db = database(dir, name, scenario, workflows, seed);
    let file = dir.join(format!("{scenario}-{seed}.jsonl"));
    crate::lake_kit::ok(&["ingest", "--db", reference.to_str().unwrap(), file.to_str().unwrap()]);
    db
}

/// Three nodes export to one table at once, then one of them again; the
/// table reads, by the product and by pyiceberg, as one node that received
/// every record.
fn nodes_commit_to_one_table(store: Store) {
    let postgres = Postgres::start();
    let catalog = postgres.catalog();
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference.duckdb");
    let dbs = [
        node_db(dir.path(), "a", "rate-limit-fallback", 120, 41, &reference),
        node_db(dir.path(), "b", "gateway-reroute", 100, 42, &reference),
        node_db(dir.path(), "c", "naive-retries", 60, 43, &reference),
    ];
    // They create the lake and the table, and commit, at the same moment.
    let children: Vec<Child> = dbs
        .iter()
        .zip(["a", "b", "c"])
        .map(|(db, node)| {
            store.export(db, node, &catalog).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    ingest(&dbs[0], dir.path(), "overnight-529-storm", 60, 44);
    let file = dir.path().join("overnight-529-storm-44.jsonl");
    crate::lake_kit::ok(&["ingest", "--db", reference.to_str().unwrap(), file.to_str().unwrap()]);
    let out = store.export(&dbs[0], "a", &catalog).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let again = store.export(&dbs[0], "a", &catalog).output().unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("already holds every attempt"));

    let total = attempts_of(&reference);
    let want = report_of(&reference);
    let got = store.report(&catalog, &[]);
    assert_same(&sections(&got), &sections(&want), "report --lake --catalog");
    assert_eq!(got["lake"]["attempts"], total);
    assert_eq!(got["lake"]["copies_read"], total, "each attempt once in the table");
    assert!(got["lake"]["iceberg_snapshot_id"].is_i64(), "{:#}", got["lake"]);

    let table = store.pyiceberg(&postgres);
    assert_eq!(table["rows"], total, "{table:#}");
    assert_eq!(table["attempts"], total);
    assert_eq!(table["output_tokens"], want["tokens"]["total"]["output"]);
    let by_node: u64 = ["a", "b", "c"].iter().map(|n| table["by_node"][n].as_u64().unwrap()).sum();
    assert_eq!(by_node, total);
    // One append snapshot per export, each naming its node and export.
    let snapshots = table["snapshots"].as_array().unwrap();
    assert_eq!(snapshots.len(), 4, "{snapshots:#?}");
    assert!(snapshots.iter().all(|s| s["operation"] == "Operation.APPEND"), "{snapshots:#?}");
    let mut nodes: Vec<&str> = snapshots.iter().map(|s| s["attempt-ledger.node"].as_str().unwrap()).collect();
    nodes.sort();
    assert_eq!(nodes, ["a", "a", "b", "c"]);
    // The watermark of each node moved in the commit of its files.
    let last_a = snapshots.iter().rfind(|s| s["attempt-ledger.node"] == "a").unwrap();
    assert_eq!(table["properties"]["attempt-ledger.watermark.a"], last_a["attempt-ledger.lake-through"]);
    assert_eq!(
        table["partition"],
        serde_json::json!([["started_at_day", "day"], ["workflow_id_bucket", "bucket[16]"]])
    );
    assert_eq!(table["field_ids"]["ingest_node"], 1);
    assert_eq!(table["field_ids"]["attempt_id"], 2);

    // `lake check` finds the table and the lake in agreement.
    let lake = store.lake();
    let out =
        store.command(&["lake", "check", &lake, "--catalog", &catalog, "--format", "json"]).output().unwrap();
    let check: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("lake check: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(0), "{check:#}");
    assert_eq!(check["iceberg"]["rows"], total, "{check:#}");
    assert_eq!(check["iceberg"]["snapshots"], 4);
    assert_eq!(check["iceberg"]["snapshots_past_retention"], 0);
    assert!(check["iceberg"]["not_in_table"].as_array().unwrap().is_empty());
    assert!(check["iceberg"]["missing"].as_array().unwrap().is_empty());
    assert!(check["iceberg"]["newer_metadata"].as_array().unwrap().is_empty());
    // A metadata file newer than the catalog's (a commit killed after
    // writing it) is named: ClickHouse's catalog-less reader would take it.
    if let Store::Folder(root) = &store {
        let planted = root.join("metadata/99999-planted.metadata.json");
        std::fs::write(&planted, "{}").unwrap();
        let out = store.command(&["lake", "check", &lake, "--catalog", &catalog]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(4), "{text}");
        assert!(text.contains("newer than the catalog's: metadata/99999-planted.metadata.json"), "{text}");
        std::fs::remove_file(planted).unwrap();
    }
}

#[test]
fn nodes_commit_to_one_iceberg_table_in_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    nodes_commit_to_one_table(Store::Folder(dir.path().join("lake")));
}

#[test]
fn nodes_commit_to_one_iceberg_table_in_s3() {
    let server = S3Server::start("lake");
    nodes_commit_to_one_table(Store::S3(server, "s3://lake/iceberg/attempts".to_string()));
}

/// An export killed at later and later moments (before, during and after
/// its commit) is finished by the next run, and the table holds each
/// attempt once.
#[test]
fn an_export_killed_around_its_commit_is_committed_once() {
    let postgres = Postgres::start();
    let catalog = postgres.catalog();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::Folder(dir.path().join("lake"));
    let db = database(dir.path(), "a", "overnight-529-storm", 400, 51);
    let mut delay = Duration::from_millis(50);
    for round in 0..8 {
        ingest(&db, dir.path(), "rate-limit-fallback", 30, 60 + round);
        let mut child =
            store.export(&db, "a", &catalog).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        let _ = child.wait();
        delay += Duration::from_millis(120);
    }
    let out: Output = store.export(&db, "a", &catalog).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let total = attempts_of(&db);
    let table = store.pyiceberg(&postgres);
    assert_eq!(table["rows"], total, "{table:#}");
    assert_eq!(table["attempts"], total);
    let got = store.report(&catalog, &[]);
    assert_same(&sections(&got), &sections(&report_of(&db)), "report --lake --catalog after kills");
    // In the order they were committed, each snapshot's numbers follow the
    // one before: no export twice, none out of order.
    let snapshots = table["snapshots"].as_array().unwrap();
    let mut next = 1;
    for snapshot in snapshots {
        let from: i64 = snapshot["attempt-ledger.lake-from"].as_str().unwrap().parse().unwrap();
        let through: i64 = snapshot["attempt-ledger.lake-through"].as_str().unwrap().parse().unwrap();
        assert_eq!(from, next, "{snapshots:#?}");
        next = through + 1;
    }
}

/// A catalog that cannot be reached, and flags that do not go together,
/// are refused before anything is written, naming what to fix.
#[test]
fn iceberg_flags_and_an_unreachable_catalog_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), "a", "rate-limit-fallback", 20, 71);
    let lake = dir.path().join("lake");
    let run = |extra: &[&str]| {
        let mut args = vec!["export", "--db", db.to_str().unwrap(), "--lake", lake.to_str().unwrap()];
        args.extend_from_slice(extra);
        Command::new(BIN).args(&args).env_remove("ATTEMPT_LEDGER_CATALOG").output().unwrap()
    };
    let out = run(&["--table-format", "iceberg"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("give --catalog"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["--catalog", "postgres://postgres@127.0.0.1:9/none"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--table-format iceberg"));
    let out = run(&["--table-format", "iceberg", "--catalog", "ftp://x/y"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a catalog"));
    // Port 9 (discard) on loopback: nothing listens.
    let out = run(&["--table-format", "iceberg", "--catalog", "postgres://ledger:secret@127.0.0.1:9/none"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Iceberg catalog postgres://ledger:***@127.0.0.1:9/none"), "{stderr}");
    assert!(!stderr.contains("secret"), "{stderr}");
    assert!(!lake.join("_nodes").exists(), "nothing is bound before the catalog answers");
}

/// ClickHouse (chdb) reads the table by its own Iceberg reader, from the
/// table's latest metadata, and the report's SQL for ClickHouse
/// (queries/lake/clickhouse/report.sql) over it gives the reference node's
/// report.
#[test]
fn clickhouse_reads_the_iceberg_table_as_one_node() {
    let postgres = Postgres::start();
    let catalog = postgres.catalog();
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference.duckdb");
    let lake = dir.path().join("lake");
    let store = Store::Folder(lake.clone());
    for (node, scenario, seed) in [("a", "rate-limit-fallback", 81), ("b", "overnight-529-storm", 82)] {
        let db = node_db(dir.path(), node, scenario, 80, seed, &reference);
        let out = store.export(&db, node, &catalog).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let script = format!("{}/scripts/lake-report.py", env!("CARGO_MANIFEST_DIR"));
    let out = crate::lake::python_lake()
        .args([&script, "--engine", "clickhouse", lake.to_str().unwrap(), "--iceberg"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_same(&sections(&got), &sections(&report_of(&reference)), "chdb over the Iceberg table");
    assert_eq!(got["lake"]["attempts"], attempts_of(&reference));
}

/// A lake exported as files before it had a table: the first commit of each
/// node takes its earlier exports too, so the table holds every attempt.
#[test]
fn a_lake_that_gains_a_table_commits_its_earlier_exports() {
    let postgres = Postgres::start();
    let catalog = postgres.catalog();
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let db = database(dir.path(), "a", "rate-limit-fallback", 60, 91);
    for round in 0..2 {
        let out = crate::lake_kit::export(&db, &lake, "a", &[]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        ingest(&db, dir.path(), "gateway-reroute", 40, 92 + round);
    }
    let store = Store::Folder(lake);
    let out = store.export(&db, "a", &catalog).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let total = attempts_of(&db);
    let table = store.pyiceberg(&postgres);
    assert_eq!(table["rows"], total, "{table:#}");
    let snapshots = table["snapshots"].as_array().unwrap();
    assert_eq!(snapshots.len(), 1, "{snapshots:#?}");
    assert_eq!(snapshots[0]["attempt-ledger.lake-from"], "1");
    let lake = store.lake();
    let check = |want: i32| {
        let out = store.command(&["lake", "check", &lake, "--catalog", &catalog]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(out.status.code(), Some(want), "{text}");
        text
    };
    check(0);
    // An export without the table: `lake check` names its files as not in
    // the table, and the next export with the table commits them, though
    // it has nothing new to write.
    ingest(&db, dir.path(), "naive-retries", 30, 95);
    let out = crate::lake_kit::export(&db, Path::new(&lake), "a", &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(check(4).contains("not in the table: attempts/day="));
    let out = store.export(&db, "a", &catalog).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("already holds every attempt"));
    check(0);
    assert_eq!(store.pyiceberg(&postgres)["rows"], attempts_of(&db));
    assert_same(
        &sections(&store.report(&catalog, &[])),
        &sections(&report_of(&db)),
        "a table over earlier exports",
    );
}

/// Creates the lake's table with pyiceberg as an earlier version would
/// have: the columns of `_lake.json` but the last `fewer`, partitioned as
/// attempt-ledger partitions it.
const OLDER_TABLE: &str = r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, DayTransform
from pyiceberg.types import BooleanType, DoubleType, IntegerType, LongType, NestedField, StringType, TimestampType
uri, lake, fewer = sys.argv[1], sys.argv[2], int(sys.argv[3])
columns = json.load(open(f"{lake}/_lake.json"))["schema"][:-fewer]
types = {"VARCHAR": StringType(), "BIGINT": LongType(), "INTEGER": IntegerType(), "DOUBLE": DoubleType(),
         "BOOLEAN": BooleanType(), "TIMESTAMP": TimestampType()}
schema = Schema(*[NestedField(i + 1, c["name"], types[c["type"]], required=False) for i, c in enumerate(columns)])
ids = {c["name"]: i + 1 for i, c in enumerate(columns)}
spec = PartitionSpec(PartitionField(ids["started_at"], 1000, DayTransform(), "started_at_day"),
                     PartitionField(ids["workflow_id"], 1001, BucketTransform(16), "workflow_id_bucket"))
catalog = SqlCatalog("attempt_ledger", uri=uri)
catalog.create_namespace_if_not_exists("attempt_ledger")
catalog.create_table("attempt_ledger.attempts", schema, location=f"file://{lake}", partition_spec=spec)
"#;

/// A table an earlier version made, with fewer columns, grows the lake's
/// columns at the end with the next field ids, and reads whole.
#[test]
fn an_older_table_grows_the_lake_s_columns() {
    let postgres = Postgres::start();
    let catalog = postgres.catalog();
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let db = database(dir.path(), "a", "long-documents", 40, 101);
    let out = crate::lake_kit::export(&db, &lake, "a", &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let python = std::env::var("ATTEMPT_LEDGER_TEST_PYTHON_ICEBERG").unwrap();
    let out = Command::new(python)
        .args(["-c", OLDER_TABLE, &postgres.sqlalchemy(), lake.to_str().unwrap(), "3"])
        .output()
        .unwrap();
    assert!(out.status.success(), "pyiceberg: {}", String::from_utf8_lossy(&out.stderr));
    ingest(&db, dir.path(), "rate-limit-fallback", 30, 102);
    let store = Store::Folder(lake.clone());
    let out = store.export(&db, "a", &catalog).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(lake.join("_lake.json")).unwrap()).unwrap();
    let columns = manifest["schema"].as_array().unwrap();
    let table = store.pyiceberg(&postgres);
    assert_eq!(table["field_ids"].as_object().unwrap().len(), columns.len(), "{table:#}");
    for (index, column) in columns.iter().enumerate() {
        assert_eq!(table["field_ids"][column["name"].as_str().unwrap()], index + 1, "{table:#}");
    }
    assert_eq!(table["rows"], attempts_of(&db));
    assert_same(&sections(&store.report(&catalog, &[])), &sections(&report_of(&db)), "a grown table");
}

/// Nodes commit at once through a REST catalog that assigns each table's
/// location itself (a managed catalog); the table reads, through the same
/// catalog, as one node that received every record.
#[test]
fn nodes_commit_through_a_rest_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("warehouse");
    std::fs::create_dir_all(&storage).unwrap();
    let rest = RestCatalog::start(&storage);
    let reference = dir.path().join("reference.duckdb");
    let lake = dir.path().join("lake");
    let dbs = [
        node_db(dir.path(), "a", "rate-limit-fallback", 100, 111, &reference),
        node_db(dir.path(), "b", "gateway-reroute", 80, 112, &reference),
    ];
    // The token comes from the environment, as a deployment would give it.
    let export = |db: &Path, node: &str| {
        let mut command = Command::new(BIN);
        command
            .args([
                "export",
                "--db",
                db.to_str().unwrap(),
                "--lake",
                lake.to_str().unwrap(),
                "--node-id",
                node,
            ])
            .args(["--table-format", "iceberg", "--iceberg-table", "bronze.attempts"])
            .env("ATTEMPT_LEDGER_CATALOG", rest.catalog());
        command
    };
    let children: Vec<Child> = dbs
        .iter()
        .zip(["a", "b"])
        .map(|(db, node)| export(db, node).stderr(Stdio::piped()).spawn().unwrap())
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(!String::from_utf8_lossy(&out.stderr).contains(&rest.token), "the token is never printed");
    }
    let total = attempts_of(&reference);
    let out = Command::new(BIN)
        .args(["report", "--lake", lake.to_str().unwrap(), "--iceberg-table", "bronze.attempts"])
        .args(["--format", "json", "--no-audit"])
        .env("ATTEMPT_LEDGER_CATALOG", rest.catalog())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_same(&sections(&got), &sections(&report_of(&reference)), "report --lake through a REST catalog");
    assert!(got["lake"]["iceberg_snapshot_id"].is_i64(), "{:#}", got["lake"]);
    let catalog = serde_json::json!({
        "type": "rest",
        "uri": format!("http://127.0.0.1:{}", rest.port),
        "prefix": "dev",
        "token": rest.token,
    });
    let table = pyiceberg(
        "ATTEMPT_LEDGER_TEST_PYTHON_REST_CATALOG",
        &catalog,
        "bronze.attempts",
        &serde_json::json!({}),
    );
    assert_eq!(table["rows"], total, "{table:#}");
    assert_eq!(table["snapshots"].as_array().unwrap().len(), 2);

    // Expiry commits through the REST protocol too (iceberg-rust has no
    // delete action: attempt-ledger sends the catalog the commit itself).
    let out = Command::new(BIN)
        .args(["lake", "expire", lake.to_str().unwrap(), "--before", "2026-11-29"])
        .args(["--iceberg-table", "bronze.attempts", "--format", "json"])
        .env("ATTEMPT_LEDGER_CATALOG", rest.catalog())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let done: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(done["iceberg"]["rows"], total, "every simulated attempt is of 2026-11-28: {done:#}");
    let table = pyiceberg(
        "ATTEMPT_LEDGER_TEST_PYTHON_REST_CATALOG",
        &catalog,
        "bronze.attempts",
        &serde_json::json!({}),
    );
    assert_eq!(table["rows"], 0, "{table:#}");
    let snapshots = table["snapshots"].as_array().unwrap();
    assert_eq!(snapshots.len(), 3, "{snapshots:#?}");
    assert_eq!(snapshots[2]["operation"], "Operation.DELETE");
}

/// pyiceberg sets the table's properties `props_to_set` (as a warehouse's
/// operator would, e.g. its snapshot retention).
const PYICEBERG_SET: &str = r#"
import json, sys
from pyiceberg.catalog import load_catalog
catalog, name, props, updates = (json.loads(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]),
                                 json.loads(sys.argv[4]))
table = load_catalog("attempt_ledger", **catalog, **props).load_table(name)
with table.transaction() as tx:
    tx.set_properties(**updates)
"#;

impl Store {
    fn pyiceberg_props(&self) -> Value {
        match self {
            Store::Folder(_) => serde_json::json!({}),
            Store::S3(server, _) => serde_json::json!({
                "s3.endpoint": server.endpoint(),
                "s3.access-key-id": "attempt-ledger-test",
                "s3.secret-access-key": "attempt-ledger-test",
                "s3.region": "us-east-1",
            }),
        }
    }

    fn set_table_properties(&self, postgres: &Postgres, updates: &Value) {
        let python = std::env::var("ATTEMPT_LEDGER_TEST_PYTHON_ICEBERG").unwrap();
        let catalog = serde_json::json!({"type": "sql", "uri": postgres.sqlalchemy()});
        let out = Command::new(python)
            .args(["-c", PYICEBERG_SET, &catalog.to_string(), "attempt_ledger.attempts"])
            .arg(self.pyiceberg_props().to_string())
            .arg(updates.to_string())
            .output()
            .unwrap();
        assert!(out.status.success(), "pyiceberg: {}", String::from_utf8_lossy(&out.stderr));
    }
}

/// `lake expire --catalog`: the table loses every day before the horizon
/// in one delete snapshot, and reads (through the product, pyiceberg and
/// `lake check`) as a database that never held them; its files stay while
/// snapshots within the table's retention reach them, and go once those
/// snapshots are past it. Late attempts of an expired day stay out of the
/// table.
fn expired_days_leave_the_table(store: Store) {
    use crate::lake_retention::on_day;
    let postgres = Postgres::start();
    let catalog = postgres.catalog();
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference.duckdb");
    let nodes =
        [("a", "rate-limit-fallback", "gateway-reroute"), ("b", "overnight-529-storm", "naive-retries")];
    for (node, expired, kept) in nodes {
        let db = dir.path().join(format!("{node}.duckdb"));
        on_day(dir.path(), &db, None, expired, 131, "2026-11-01");
        on_day(dir.path(), &db, Some(&reference), kept, 132, "2026-11-02");
        let out = store.export(&db, node, &catalog).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let total = attempts_of(&reference);
    let lake = store.lake();
    let expire = || -> Value {
        let args =
            ["lake", "expire", &lake, "--before", "2026-11-02", "--catalog", &catalog, "--format", "json"];
        serde_json::from_str(&store.ok(&args)).unwrap()
    };
    let done = expire();
    assert_eq!(done["iceberg"]["expired_snapshots"], 0, "{done:#}");
    assert!(done["iceberg"]["files"].as_u64().unwrap() > 0, "{done:#}");
    assert_eq!(done["deleted_files"], 0, "snapshots within the table's retention still reach them: {done:#}");
    assert_eq!(done["kept_for_snapshots"], done["iceberg"]["files"], "{done:#}");
    let table = store.pyiceberg(&postgres);
    assert_eq!(table["rows"], total, "{table:#}");
    let last = table["snapshots"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["operation"], "Operation.DELETE", "{last:#}");
    assert_eq!(last["total-records"], total.to_string(), "{last:#}");
    assert_eq!(table["properties"]["attempt-ledger.expired-before"], "2026-11-02");
    let want = sections(&report_of(&reference));
    assert_same(&sections(&store.report(&catalog, &[])), &want, "report --lake --catalog after lake expire");
    let check = |what: &str| {
        let out = store.command(&["lake", "check", &lake, "--catalog", &catalog]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(out.status.code(), Some(0), "{what}: {text}");
    };
    check("after lake expire");

    // Late attempts of the expired day: in the lake, kept out of the table.
    let db = dir.path().join("a.duckdb");
    on_day(dir.path(), &db, None, "steady", 133, "2026-11-01");
    let out = store.export(&db, "a", &catalog).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(store.pyiceberg(&postgres)["rows"], total);
    check("after late attempts of an expired day");

    // Retention the operator shortened: the snapshots past it are expired,
    // and the files only they reached are deleted.
    store.set_table_properties(&postgres, &serde_json::json!({"history.expire.max-snapshot-age-ms": "1"}));
    std::thread::sleep(Duration::from_millis(20));
    let done = expire();
    assert!(done["iceberg"]["expired_snapshots"].as_u64().unwrap() >= 3, "{done:#}");
    assert!(done["iceberg"]["deleted_files"].as_u64().unwrap() > 0, "{done:#}");
    assert!(done["deleted_files"].as_u64().unwrap() > 0, "{done:#}");
    assert_eq!(done["kept_for_snapshots"], 0, "{done:#}");
    let table = store.pyiceberg(&postgres);
    assert_eq!(table["rows"], total, "{table:#}");
    assert_eq!(table["snapshots"].as_array().unwrap().len(), 1, "{table:#}");
    if let Store::Folder(root) = &store {
        assert!(!root.join("attempts/day=2026-11-01").exists());
        // ClickHouse's own Iceberg reader, from the table's latest metadata
        // (the commits attempt-ledger made itself), reads it the same.
        let script = format!("{}/scripts/lake-report.py", env!("CARGO_MANIFEST_DIR"));
        let out = crate::lake::python_lake()
            .args([&script, "--engine", "clickhouse", root.to_str().unwrap(), "--iceberg"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let got: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_same(&sections(&got), &want, "chdb over the Iceberg table after lake expire");
    }
    assert_same(
        &sections(&store.report(&catalog, &[])),
        &want,
        "report --lake --catalog after snapshots expired",
    );
    check("after snapshots expired");
}

#[test]
fn expired_days_leave_the_iceberg_table_in_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    expired_days_leave_the_table(Store::Folder(dir.path().join("lake")));
}

#[test]
fn expired_days_leave_the_iceberg_table_in_s3() {
    let server = S3Server::start("lake");
    expired_days_leave_the_table(Store::S3(server, "s3://lake/retention".to_string()));
}

/// `lake expire` and exports running at the same moment: whichever commits
/// first, the table never ends with a file of an expired day, and reads as
/// the database without those days.
#[test]
fn an_expiry_racing_exports_leaves_no_expired_day_in_the_table() {
    use crate::lake_retention::on_day;
    let postgres = Postgres::start();
    let catalog = postgres.catalog();
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference.duckdb");
    let store = Store::Folder(dir.path().join("lake"));
    let lake = store.lake();
    let dbs: Vec<PathBuf> =
        ["a", "b", "c"].iter().map(|node| dir.path().join(format!("{node}.duckdb"))).collect();
    // A simulated scenario's attempt ids do not depend on its seed or start:
    // each node and day has a scenario of its own.
    let days = [
        ("2026-11-01", ["rate-limit-fallback", "gateway-reroute", "naive-retries"]),
        ("2026-11-02", ["steady", "quota-exhausted", "report-batch"]),
    ];
    for (round, (day, scenarios)) in days.into_iter().enumerate() {
        for (index, db) in dbs.iter().enumerate() {
            let kept = (round == 1).then_some(reference.as_path());
            on_day(dir.path(), db, kept, scenarios[index], 140 + index as u32, day);
        }
    }
    // The first node makes the table; then two nodes and the expiry race.
    let out = store.export(&dbs[0], "a", &catalog).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let expire = store
        .command(&["lake", "expire", &lake, "--before", "2026-11-02", "--catalog", &catalog])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let exports: Vec<Child> = [(1, "b"), (2, "c")]
        .iter()
        .map(|(i, node)| store.export(&dbs[*i], node, &catalog).stderr(Stdio::piped()).spawn().unwrap())
        .collect();
    for child in exports.into_iter().chain([expire]) {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let table = store.pyiceberg(&postgres);
    assert_eq!(table["rows"], attempts_of(&reference), "{table:#}");
    let out = store.command(&["lake", "check", &lake, "--catalog", &catalog]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    assert_same(
        &sections(&store.report(&catalog, &[])),
        &sections(&report_of(&reference)),
        "report --lake --catalog after an expiry raced exports",
    );
}
