//! The database's side of the attempt lake (`crate::lake`): which node this
//! database is, which numbered writes a lake holds, the slice of attempts
//! an export writes as Parquet, and a lake read back into a scratch
//! database so the product's own rules derive its report.

use std::path::Path;

use chrono::{DateTime, NaiveDate, Utc};
use duckdb::params;

use super::writer::COLUMNS;
use super::{Store, StoreError, deriver, temp};
use crate::pricing::PriceTable;

/// The lake's columns as written from the attempts table: the node, then
/// every stored column. The fingerprint is DuckDB's UBIGINT, which Spark
/// reads as a decimal: its bits are written as a BIGINT.
fn lake_select() -> String {
    let columns: Vec<String> = COLUMNS
        .iter()
        .map(|c| match *c {
            "fingerprint" => "fingerprint_bits(fingerprint) AS fingerprint".to_string(),
            other => other.to_string(),
        })
        .collect();
    format!("{}, ingested_at", columns.join(", "))
}

/// The stored columns a lake row goes back into, and how each is read
/// from the lake's (the fingerprint's bits back to UBIGINT).
fn stored_from_lake() -> (String, String) {
    let mut targets: Vec<&str> = COLUMNS.iter().copied().filter(|c| *c != "ingest_seq").collect();
    targets.push("ingested_at");
    let sources: Vec<String> = targets
        .iter()
        .map(|c| match *c {
            "fingerprint" => "fingerprint_unsigned(fingerprint)".to_string(),
            other => other.to_string(),
        })
        .collect();
    (format!("{}, ingest_seq", targets.join(", ")), format!("{}, bucket + 1", sources.join(", ")))
}

const MACROS: &str = "
    CREATE OR REPLACE TEMP MACRO fingerprint_bits(f) AS
        (f::HUGEINT - CASE WHEN f >= 9223372036854775808 THEN 18446744073709551616 ELSE 0 END)::BIGINT;
    CREATE OR REPLACE TEMP MACRO fingerprint_unsigned(f) AS
        (f::HUGEINT + CASE WHEN f < 0 THEN 18446744073709551616 ELSE 0 END)::UBIGINT;";

/// The attempts one export writes: those numbered after `after` up to
/// `through`, by partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportSlice {
    pub after: i64,
    pub through: i64,
    pub attempts: u64,
    pub partitions: Vec<Partition>,
}

/// One day and bucket of an export: its rows go to one file (or several
/// when they are many).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub day: NaiveDate,
    pub bucket: u32,
    pub rows: u64,
}

/// What `load_lake` read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LakeLoad {
    /// Rows read inside the horizon: every stored copy of an attempt.
    pub copies: u64,
    /// Attempts left once copies and superseded trace revisions are dropped.
    pub attempts: u64,
}

/// Which lake rows a load reads: the days of its horizon, and the rows
/// started inside it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Horizon {
    pub from: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
}

impl Horizon {
    fn condition(&self) -> String {
        let mut clauses = vec!["true".to_string()];
        if let Some(from) = self.from {
            clauses.push(format!(
                "day >= DATE '{}' AND started_at >= {}",
                from.date_naive(),
                timestamp_sql(from)
            ));
        }
        if let Some(until) = self.until {
            clauses.push(format!(
                "day <= DATE '{}' AND started_at < {}",
                until.date_naive(),
                timestamp_sql(until)
            ));
        }
        clauses.join(" AND ")
    }
}

fn timestamp_sql(t: DateTime<Utc>) -> String {
    format!("make_timestamp({}::BIGINT)", t.timestamp_micros())
}

fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The lake's Parquet files of `root` as DuckDB's `read_parquet` reads
/// them, with the partition columns of their paths.
fn lake_files(root: &Path) -> String {
    let glob = root.join("attempts").join("day=*").join("bucket=*").join("*.parquet");
    format!(
        "read_parquet({}, hive_partitioning = true, hive_types = {{'day': DATE, 'bucket': INTEGER}})",
        quoted(&glob.display().to_string())
    )
}

/// The dedup of the lake (docs/lake.md, "Reading the lake"): the newest
/// revision of each trace's derived attempts on the node that derived it,
/// then the first stored copy of each attempt.
const LAKE_DEDUP_SQL: &str = include_str!("../../queries/lake/dedup.sql");

impl Store {
    /// This database's node id: the one stored, else `wanted` (or a new
    /// one) stored now. A different `wanted` than the stored one is refused.
    pub fn node_id(&self, wanted: Option<&str>) -> Result<String, StoreError> {
        self.in_transaction(|conn| {
            let stored: Option<String> =
                conn.query_row("SELECT min(node_id) FROM lake_node", [], |r| r.get(0))?;
            match (stored, wanted) {
                (Some(stored), Some(wanted)) if stored != wanted => {
                    Err(StoreError::NodeId { stored, asked: wanted.to_string() })
                }
                (Some(stored), _) => Ok(stored),
                (None, wanted) => {
                    let id = wanted.map_or_else(new_node_id, str::to_string);
                    conn.execute("INSERT INTO lake_node (node_id) VALUES (?)", [&id])?;
                    Ok(id)
                }
            }
        })
    }

    /// The lake files' columns and their DuckDB types, in file order.
    pub fn lake_schema(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.conn.execute_batch(MACROS)?;
        let sql = format!("DESCRIBE SELECT ''::VARCHAR AS ingest_node, {} FROM attempts", lake_select());
        let columns = self
            .conn
            .prepare(&sql)?
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
            .collect::<Result<_, _>>()?;
        Ok(columns)
    }

    /// The export to `lake_id` to do now: one a crash left unfinished (the
    /// same numbers again), else the attempts derived since the last one.
    /// `None` when the lake holds everything. The export is recorded as
    /// begun before it returns.
    pub fn begin_export(
        &self,
        lake_id: &str,
        bucket_of: impl Fn(&str) -> u32,
    ) -> Result<Option<ExportSlice>, StoreError> {
        let range = self.in_transaction(|conn| {
            let unfinished: Option<(i64, i64)> = conn
                .query_row(
                    "SELECT from_seq, through_seq FROM lake_exports
                     WHERE lake_id = ? AND finished_at IS NULL ORDER BY started_at LIMIT 1",
                    [lake_id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map(Some)
                .or_else(
                    |e| if matches!(e, duckdb::Error::QueryReturnedNoRows) { Ok(None) } else { Err(e) },
                )?;
            if let Some(range) = unfinished {
                return Ok(Some(range));
            }
            let after = exported_through(conn, lake_id)?;
            // Only derived writes: a trace's attempts exist once derived.
            let through = deriver::derived_seq(conn)?;
            if through <= after {
                return Ok(None);
            }
            conn.execute(
                "INSERT INTO lake_exports (lake_id, from_seq, through_seq) VALUES (?, ?, ?)",
                params![lake_id, after, through],
            )?;
            Ok(Some((after, through)))
        })?;
        let Some((after, through)) = range else { return Ok(None) };
        let conn = &self.conn;
        let workflows: Vec<String> = conn
            .prepare("SELECT DISTINCT workflow_id FROM attempts WHERE ingest_seq > ? AND ingest_seq <= ?")?
            .query_map([after, through], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let buckets: Vec<String> = workflows.iter().map(|w| bucket_of(w).to_string()).collect();
        conn.execute_batch(
            "CREATE OR REPLACE TEMP TABLE lake_buckets (workflow_id VARCHAR, bucket VARCHAR);",
        )?;
        temp::fill(
            conn,
            "lake_buckets",
            &["workflow_id", "bucket"],
            workflows.iter().zip(&buckets).map(|(w, b)| vec![w.as_str(), b.as_str()]),
        )?;
        conn.execute_batch(MACROS)?;
        conn.execute(
            &format!(
                "CREATE OR REPLACE TEMP TABLE lake_slice AS
                 SELECT b.bucket::INTEGER AS bucket, a.started_at::DATE AS day, {}
                 FROM attempts a JOIN temp.lake_buckets b USING (workflow_id)
                 WHERE a.ingest_seq > ? AND a.ingest_seq <= ?",
                lake_select()
            ),
            [after, through],
        )?;
        conn.execute_batch("DROP TABLE temp.lake_buckets;")?;
        // Days as days since 1970: a stored timestamp is a valid date.
        let partitions: Vec<Partition> = conn
            .prepare(
                "SELECT day - DATE '1970-01-01', bucket, count(*) FROM temp.lake_slice GROUP BY day, bucket
                 ORDER BY day, bucket",
            )?
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?)))?
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .map(|(days, bucket, rows)| Partition {
                day: DateTime::from_timestamp(days * 86_400, 0).unwrap_or_default().date_naive(),
                bucket: bucket as u32,
                rows: rows as u64,
            })
            .collect();
        let attempts = partitions.iter().map(|p| p.rows).sum();
        Ok(Some(ExportSlice { after, through, attempts, partitions }))
    }

    /// Writes rows `offset..offset + limit` of `partition` of the slice
    /// `begin_export` staged, in the lake's order, as zstd Parquet at `path`.
    pub fn write_partition(
        &self,
        partition: &Partition,
        offset: u64,
        limit: u64,
        node: &str,
        path: &Path,
    ) -> Result<(), StoreError> {
        self.conn.execute_batch(&format!(
            "COPY (SELECT {node} AS ingest_node, * EXCLUDE (bucket, day) FROM temp.lake_slice
                   WHERE day = DATE '{day}' AND bucket = {bucket}
                   ORDER BY workflow_id, started_at, attempt_id
                   LIMIT {limit} OFFSET {offset})
             TO {path} (FORMAT parquet, COMPRESSION zstd);",
            node = quoted(node),
            day = partition.day,
            bucket = partition.bucket,
            path = quoted(&path.display().to_string()),
        ))?;
        Ok(())
    }

    /// Writes the resolved price of every served model stored, as the
    /// lake's engines price with it (pico-USD per token), at `path`.
    pub fn write_prices(&self, prices: &PriceTable, node: &str, path: &Path) -> Result<(), StoreError> {
        super::queries::load_prices(&self.conn, prices)?;
        self.conn.execute_batch(&format!(
            "COPY (SELECT {node} AS ingest_node, now()::TIMESTAMP AS exported_at, * FROM temp.prices
                   ORDER BY served_provider, served_model)
             TO {path} (FORMAT parquet, COMPRESSION zstd);",
            node = quoted(node),
            path = quoted(&path.display().to_string()),
        ))?;
        Ok(())
    }

    /// Records the export `begin_export` returned as complete.
    pub fn finish_export(
        &self,
        lake_id: &str,
        slice: &ExportSlice,
        files: u64,
        bytes: u64,
    ) -> Result<(), StoreError> {
        self.conn.execute_batch("DROP TABLE IF EXISTS temp.lake_slice;")?;
        self.conn.execute(
            "UPDATE lake_exports SET files = ?, attempts = ?, bytes = ?, finished_at = now()::TIMESTAMP
             WHERE lake_id = ? AND from_seq = ? AND through_seq = ? AND finished_at IS NULL",
            params![files as i64, slice.attempts as i64, bytes as i64, lake_id, slice.after, slice.through],
        )?;
        Ok(())
    }

    /// Attempts derived but not yet in the lake `lake_id`, and the lake
    /// bytes per attempt of its exports so far (`None` before the first).
    pub fn unexported(&self, lake_id: &str) -> Result<(u64, Option<f64>), StoreError> {
        let after = exported_through(&self.conn, lake_id)?;
        let through = deriver::derived_seq(&self.conn)?;
        let pending: i64 = self.conn.query_row(
            "SELECT count(*) FROM attempts WHERE ingest_seq > ? AND ingest_seq <= ?",
            [after, through],
            |r| r.get(0),
        )?;
        let per_attempt: Option<f64> = self.conn.query_row(
            "SELECT sum(bytes) / nullif(sum(attempts), 0) FROM lake_exports
             WHERE lake_id = ? AND finished_at IS NOT NULL",
            [lake_id],
            |r| r.get(0),
        )?;
        Ok((pending as u64, per_attempt))
    }

    /// The attempts `prune(before)` would delete that the lake this
    /// database last exported to does not hold: `None` when it never
    /// exported (nothing to protect), else (lake id, attempts).
    pub fn unexported_before(&self, before: DateTime<Utc>) -> Result<Option<(String, u64)>, StoreError> {
        let lake: Option<String> =
            self.conn.query_row("SELECT arg_max(lake_id, started_at) FROM lake_exports", [], |r| r.get(0))?;
        let Some(lake) = lake else { return Ok(None) };
        let after = exported_through(&self.conn, &lake)?;
        let rows: i64 = self.conn.query_row(
            &format!(
                "SELECT count(*) FROM attempts
                 WHERE ingest_seq > ?
                   AND workflow_id IN (SELECT workflow_id FROM workflow_facts WHERE first_at < {})",
                timestamp_sql(before)
            ),
            [after],
            |r| r.get(0),
        )?;
        Ok(Some((lake, rows as u64)))
    }

    /// Reads the lake at `root` into this (empty, scratch) database: the
    /// rows started inside `horizon`, deduplicated as every engine does
    /// (`queries/lake/dedup.sql`), left for derivation as one write per
    /// bucket. Derive with `catch_up`, then read as any database.
    pub fn load_lake(&self, root: &Path, horizon: Horizon) -> Result<LakeLoad, StoreError> {
        let (targets, sources) = stored_from_lake();
        self.conn.execute_batch(MACROS)?;
        self.in_transaction(|conn| {
            conn.execute_batch(&format!(
                "CREATE OR REPLACE TEMP VIEW lake_rows AS SELECT * FROM {} WHERE {};",
                lake_files(root),
                horizon.condition()
            ))?;
            let copies: i64 = conn.query_row("SELECT count(*) FROM temp.lake_rows", [], |r| r.get(0))?;
            conn.execute_batch(LAKE_DEDUP_SQL)?;
            let attempts = conn.execute(
                &format!("INSERT INTO attempts ({targets}) SELECT {sources} FROM temp.lake_attempts"),
                [],
            )?;
            conn.execute_batch("DROP TABLE temp.lake_attempts; DROP VIEW temp.lake_rows;")?;
            Ok(LakeLoad { copies: copies as u64, attempts: attempts as u64 })
        })
    }

    /// Distinct attempts of the workflows `workflows` selects in the
    /// scratch database that the lake holds outside `horizon`: what a
    /// window report over the horizon did not read.
    pub fn lake_outside_horizon(
        &self,
        root: &Path,
        horizon: Horizon,
        since: Option<DateTime<Utc>>,
        until: Option<DateTime<Utc>>,
        workflow: Option<&str>,
    ) -> Result<u64, StoreError> {
        if horizon.from.is_none() && horizon.until.is_none() {
            return Ok(0);
        }
        let mut selected = vec!["true".to_string()];
        if let Some(since) = since {
            selected.push(format!("first_at >= {}", timestamp_sql(since)));
        }
        if let Some(until) = until {
            selected.push(format!("first_at < {}", timestamp_sql(until)));
        }
        if let Some(name) = workflow {
            selected.push(format!("workflow_name = {}", quoted(name)));
        }
        let outside: i64 = self.conn.query_row(
            &format!(
                "SELECT count(DISTINCT attempt_id) FROM {files}
                 WHERE NOT ({inside})
                   AND workflow_id IN (SELECT workflow_id FROM workflow_facts WHERE {selected})",
                files = lake_files(root),
                inside = horizon.condition(),
                selected = selected.join(" AND "),
            ),
            [],
            |r| r.get(0),
        )?;
        Ok(outside as u64)
    }
}

fn exported_through(conn: &duckdb::Connection, lake_id: &str) -> Result<i64, StoreError> {
    Ok(conn.query_row(
        "SELECT coalesce(max(through_seq), 0) FROM lake_exports WHERE lake_id = ? AND finished_at IS NOT NULL",
        [lake_id],
        |r| r.get(0),
    )?)
}

/// A node id for a database started without `--node-id`: random, so two
/// nodes never share one by accident.
fn new_node_id() -> String {
    let mut bytes = [0u8; 4];
    // The clock is a fallback for a system without a random source.
    if getrandom::fill(&mut bytes).is_err() {
        bytes = (Utc::now().timestamp_subsec_nanos()).to_le_bytes();
    }
    format!("node{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}
