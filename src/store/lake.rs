//! The database's side of the attempt lake (`crate::lake`): which node this
//! database is, which numbered writes a lake holds, the slice of attempts
//! an export writes as Parquet, and a lake read back into a scratch
//! database so the product's own rules derive its report.

use std::path::Path;

use chrono::{DateTime, NaiveDate, Utc};
use duckdb::params;

use super::error::StoreError;
use super::writer::COLUMNS;
use super::{Store, deriver, temp};
use attempt_core::pricing::PriceTable;

/// Columns added to the lake after its first files were written, in the
/// order they were added. Each goes after `ingested_at`, at the end of a
/// file's columns, so a file written before it is the same file with
/// fewer columns: a lake's manifest marks them `added`, a reader reads
/// them as NULL from the files that lack them.
pub const ADDED_LAKE_COLUMNS: [&str; 19] = [
    "billing_account",
    "service_tier",
    "ratelimit_remaining_requests",
    "ratelimit_limit_requests",
    "ratelimit_reset_requests_ms",
    "ratelimit_remaining_tokens",
    "ratelimit_limit_tokens",
    "ratelimit_reset_tokens_ms",
    "ratelimit_remaining_input_tokens",
    "ratelimit_limit_input_tokens",
    "ratelimit_reset_input_tokens_ms",
    "ratelimit_remaining_output_tokens",
    "ratelimit_limit_output_tokens",
    "ratelimit_reset_output_tokens_ms",
    "reasoning_output_tokens",
    "cost_currency",
    "batch",
    "cache_write_1h_input_tokens",
    "web_search_requests",
];

/// The lake's columns as written from the attempts table: the node, then
/// every stored column, `ingested_at`, and the added columns. The
/// fingerprint is DuckDB's UBIGINT, which Spark reads as a decimal: its
/// bits are written as a BIGINT. A write's number goes to the lake
/// `offset` higher (`ExportSlice::offset`).
fn lake_select(offset: i64) -> String {
    let columns: Vec<String> = first_lake_columns()
        .map(|c| match c {
            "fingerprint" => "fingerprint_bits(fingerprint) AS fingerprint".to_string(),
            "ingest_seq" => format!("ingest_seq + {offset} AS ingest_seq"),
            other => other.to_string(),
        })
        .collect();
    format!("{}, ingested_at, {}", columns.join(", "), ADDED_LAKE_COLUMNS.join(", "))
}

/// The stored columns a lake row goes back into, and how each is read
/// from the lake's (the fingerprint's bits back to UBIGINT).
fn stored_from_lake() -> (String, String) {
    let mut targets: Vec<&str> = first_lake_columns().filter(|c| *c != "ingest_seq").collect();
    targets.push("ingested_at");
    targets.extend(ADDED_LAKE_COLUMNS);
    let sources: Vec<String> = targets
        .iter()
        .map(|c| match *c {
            "fingerprint" => "fingerprint_unsigned(fingerprint)".to_string(),
            other => other.to_string(),
        })
        .collect();
    (format!("{}, ingest_seq", targets.join(", ")), format!("{}, bucket + 1", sources.join(", ")))
}

/// The stored columns of the lake's first files, in the order they hold them.
fn first_lake_columns() -> impl Iterator<Item = &'static str> {
    COLUMNS.iter().copied().filter(|c| !ADDED_LAKE_COLUMNS.contains(c))
}

const MACROS: &str = "
    CREATE OR REPLACE TEMP MACRO fingerprint_bits(f) AS
        (f::HUGEINT - CASE WHEN f >= 9223372036854775808 THEN 18446744073709551616 ELSE 0 END)::BIGINT;
    CREATE OR REPLACE TEMP MACRO fingerprint_unsigned(f) AS
        (f::HUGEINT + CASE WHEN f < 0 THEN 18446744073709551616 ELSE 0 END)::UBIGINT;";

/// The attempts one export writes: those numbered after `after` up to
/// `through`, by partition; in the lake they are numbered `offset` higher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportSlice {
    pub after: i64,
    pub through: i64,
    pub offset: i64,
    /// Names this export in its files and in the lake's record of it.
    pub export_id: String,
    pub attempts: u64,
    pub partitions: Vec<Partition>,
    /// An export a crash interrupted, done again over the same numbers.
    pub again: bool,
    /// Set when the lake held numbers of this node beyond this database's
    /// own exports: the highest of them, which this export continues after.
    pub rebased_over: Option<i64>,
}

impl ExportSlice {
    /// The first number of this export in the lake.
    pub fn lake_from(&self) -> i64 {
        self.after + 1 + self.offset
    }

    /// The last number of this export in the lake.
    pub fn lake_through(&self) -> i64 {
        self.through + self.offset
    }
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
    pub(super) fn condition(&self) -> String {
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

pub(super) fn timestamp_sql(t: DateTime<Utc>) -> String {
    format!("make_timestamp({}::BIGINT)", t.timestamp_micros())
}

pub(super) fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Which attempts files of a lake a read takes.
#[derive(Debug, Clone, Copy)]
pub enum LakeFiles<'a> {
    /// Every file in the partition folders of the lake at this root.
    All(&'a Path),
    /// These files (the others are known to be bad).
    Only(&'a [std::path::PathBuf]),
}

impl LakeFiles<'_> {
    /// The files as DuckDB's `read_parquet` reads them, with the partition
    /// columns of their paths.
    pub(super) fn sql(&self) -> String {
        let files = match self {
            LakeFiles::All(root) => quoted(
                &root.join("attempts").join("day=*").join("bucket=*").join("*.parquet").display().to_string(),
            ),
            LakeFiles::Only(paths) => format!(
                "[{}]",
                paths.iter().map(|p| quoted(&p.display().to_string())).collect::<Vec<_>>().join(", ")
            ),
        };
        // By name: a file written before a column was added lacks it.
        format!(
            "read_parquet({files}, hive_partitioning = true, hive_types = {{'day': DATE, 'bucket': INTEGER}}, \
             union_by_name = true)"
        )
    }
}

/// What a Parquet file's footer says, as far as a lake reader checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParquetFooter {
    pub rows: u64,
    /// The key-value metadata, as text.
    pub metadata: std::collections::BTreeMap<String, String>,
    /// The columns with their DuckDB types, in file order.
    pub columns: Vec<(String, String)>,
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
            // Until a row has gone to a lake under it, the id can change
            // (a lake refused it as another database's).
            let exported: i64 = conn.query_row("SELECT count(*) FROM lake_exports", [], |r| r.get(0))?;
            match (stored, wanted) {
                (Some(stored), Some(wanted)) if stored != wanted && exported == 0 => {
                    conn.execute("UPDATE lake_node SET node_id = ?", [wanted])?;
                    Ok(wanted.to_string())
                }
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
        let sql = format!("DESCRIBE SELECT ''::VARCHAR AS ingest_node, {} FROM attempts", lake_select(0));
        let columns = self
            .conn
            .prepare(&sql)?
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
            .collect::<Result<_, _>>()?;
        Ok(columns)
    }

    /// This database's identity (made with it, kept by every copy of the
    /// file): what a lake binds a node id to.
    pub fn database_id(&self) -> Result<String, StoreError> {
        Ok(self.conn.query_row("SELECT min(database_id) FROM database_identity", [], |r| r.get(0))?)
    }

    /// The export to `lake_id` to do now: one a crash left unfinished (the
    /// same numbers again), else the attempts derived since the last one.
    /// `lake_high` is the highest number the lake holds of this node: when
    /// it is past what this database exported (a restored backup, or a
    /// node rebuilt under its id), the new export is numbered after it.
    /// `None` when the lake holds everything. The export is recorded as
    /// begun before it returns.
    pub fn begin_export(
        &self,
        lake_id: &str,
        lake_high: i64,
        bucket_of: impl Fn(&str) -> u32,
    ) -> Result<Option<ExportSlice>, StoreError> {
        let plan = self.in_transaction(|conn| {
            let unfinished: Option<(i64, i64, i64, Option<String>)> = conn
                .query_row(
                    "SELECT from_seq, through_seq, coalesce(lake_offset, 0), export_id FROM lake_exports
                     WHERE lake_id = ? AND finished_at IS NULL ORDER BY started_at LIMIT 1",
                    [lake_id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .map(Some)
                .or_else(
                    |e| if matches!(e, duckdb::Error::QueryReturnedNoRows) { Ok(None) } else { Err(e) },
                )?;
            if let Some((after, through, offset, export_id)) = unfinished {
                // Begun by a version that did not name its exports.
                let export_id = match export_id {
                    Some(id) => id,
                    None => {
                        let id = random_hex("export-", 8);
                        conn.execute(
                            "UPDATE lake_exports SET export_id = ? WHERE lake_id = ? AND from_seq = ?
                             AND finished_at IS NULL",
                            params![id, lake_id, after],
                        )?;
                        id
                    }
                };
                return Ok(Some(Plan { after, through, offset, export_id, again: true, rebased_over: None }));
            }
            let (after, last_offset) = exported(conn, lake_id)?;
            // Only derived writes: a trace's attempts exist once derived.
            let through = deriver::derived_seq(conn)?;
            if through <= after {
                return Ok(None);
            }
            let behind = lake_high > after + last_offset;
            let offset = if behind { lake_high - after } else { last_offset };
            let export_id = random_hex("export-", 8);
            conn.execute(
                "INSERT INTO lake_exports (lake_id, from_seq, through_seq, lake_offset, export_id)
                 VALUES (?, ?, ?, ?, ?)",
                params![lake_id, after, through, offset, export_id],
            )?;
            let rebased_over = behind.then_some(lake_high);
            Ok(Some(Plan { after, through, offset, export_id, again: false, rebased_over }))
        })?;
        let Some(Plan { after, through, offset, export_id, again, rebased_over }) = plan else {
            return Ok(None);
        };
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
                lake_select(offset)
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
        Ok(Some(ExportSlice { after, through, offset, export_id, attempts, partitions, again, rebased_over }))
    }

    /// Forgets the unfinished export `slice` (its numbers were taken in the
    /// lake by another writer of the node): the next export plans anew.
    pub fn abandon_export(&self, lake_id: &str, slice: &ExportSlice) -> Result<(), StoreError> {
        self.conn.execute_batch("DROP TABLE IF EXISTS temp.lake_slice;")?;
        self.conn.execute(
            "DELETE FROM lake_exports WHERE lake_id = ? AND export_id = ? AND finished_at IS NULL",
            params![lake_id, slice.export_id],
        )?;
        Ok(())
    }

    /// Writes rows `rows` (in the lake's order) of `partition` of the slice
    /// `begin_export` staged, as zstd Parquet at `path`, with `metadata`
    /// (key, value) in its footer and each column's Iceberg field id.
    pub fn write_partition(
        &self,
        partition: &Partition,
        rows: std::ops::Range<u64>,
        node: &str,
        path: &Path,
        metadata: &[(&str, String)],
        field_ids: &[(String, i32)],
    ) -> Result<(), StoreError> {
        let field_ids =
            field_ids.iter().map(|(name, id)| format!("{}: {id}", quoted(name))).collect::<Vec<_>>();
        let (offset, limit) = (rows.start, rows.end.saturating_sub(rows.start));
        self.conn.execute_batch(&format!(
            "COPY (SELECT {node} AS ingest_node, * EXCLUDE (bucket, day) FROM temp.lake_slice
                   WHERE day = DATE '{day}' AND bucket = {bucket}
                   ORDER BY workflow_id, started_at, attempt_id
                   LIMIT {limit} OFFSET {offset})
             TO {path} (FORMAT parquet, COMPRESSION zstd, KV_METADATA {{{metadata}}}, FIELD_IDS {{{field_ids}}});",
            node = quoted(node),
            day = partition.day,
            bucket = partition.bucket,
            path = quoted(&path.display().to_string()),
            metadata = kv_literal(metadata),
            field_ids = field_ids.join(", "),
        ))?;
        Ok(())
    }

    /// Writes what the price table answered for every price key stored
    /// (`store::prices`), as the lake's engines price with it: a row per
    /// served model and key, pico-USD per token (per search) by kind, NULL
    /// where unpriced, at `path`, with `metadata` in its footer.
    pub fn write_prices(
        &self,
        prices: &PriceTable,
        node: &str,
        path: &Path,
        metadata: &[(&str, String)],
    ) -> Result<(), StoreError> {
        super::prices::load(&self.conn, prices)?;
        self.conn.execute_batch(&format!(
            "COPY (SELECT {node} AS ingest_node, now()::TIMESTAMP AS exported_at, served_provider, served_model,
                          price_key.day AS day, price_key.tier AS tier, price_key.over AS over,
                          price_key.account AS account,
                          price.input AS input_pusd, price.cached_input AS cached_input_pusd,
                          price.cache_write AS cache_write_pusd, price.cache_write_1h AS cache_write_1h_pusd,
                          price.output AS output_pusd, price.reasoning_output AS reasoning_output_pusd,
                          price.web_search AS web_search_pusd, price IS NOT NULL AS priced, unpriced,
                          region_dropped, as_of
                   FROM temp.prices
                   ORDER BY served_provider, served_model, day, tier, over, account)
             TO {path} (FORMAT parquet, COMPRESSION zstd, KV_METADATA {{{metadata}}});",
            node = quoted(node),
            path = quoted(&path.display().to_string()),
            metadata = kv_literal(metadata),
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
             WHERE lake_id = ? AND export_id = ? AND finished_at IS NULL",
            params![files as i64, slice.attempts as i64, bytes as i64, lake_id, slice.export_id],
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

    /// What the footers of `paths` say, each on its own: a file that cannot
    /// be read as Parquet is an error naming why. One pass over every footer
    /// when all can be read; file by file to tell which cannot.
    pub fn parquet_footers(&self, paths: &[std::path::PathBuf]) -> Vec<Result<ParquetFooter, String>> {
        if paths.is_empty() {
            return Vec::new();
        }
        match self.footers_together(paths) {
            Ok(footers) => footers.into_iter().map(Ok).collect(),
            Err(_) => paths
                .iter()
                .map(|path| {
                    // The engine's words, without the path it repeats.
                    let quoted_path = format!(" '{}'", path.display());
                    self.footers_together(std::slice::from_ref(path))
                        .map_err(|e| match e {
                            StoreError::DuckDb(e) => first_line(&e.to_string()).replace(&quoted_path, ""),
                            other => first_line(&other.to_string()).replace(&quoted_path, ""),
                        })
                        .and_then(|mut one| one.pop().ok_or_else(|| "no footer".to_string()))
                })
                .collect(),
        }
    }

    fn footers_together(&self, paths: &[std::path::PathBuf]) -> Result<Vec<ParquetFooter>, StoreError> {
        use std::collections::{BTreeMap, HashMap};
        let list = format!(
            "[{}]",
            paths.iter().map(|p| quoted(&p.display().to_string())).collect::<Vec<_>>().join(", ")
        );
        let conn = &self.conn;
        let rows: HashMap<String, i64> = conn
            .prepare(&format!("SELECT file_name, num_rows FROM parquet_file_metadata({list})"))?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        let mut metadata: HashMap<String, BTreeMap<String, String>> = HashMap::new();
        let mut kv = conn.prepare(&format!(
            "SELECT file_name, decode(key), decode(value) FROM parquet_kv_metadata({list})"
        ))?;
        for row in kv.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get(2)?)))? {
            let (file, key, value) = row?;
            metadata.entry(file).or_default().insert(key, value);
        }
        // Files with the same Parquet schema have the same columns: the
        // column types are read once per distinct schema.
        let signatures: HashMap<String, String> = conn
            .prepare(&format!(
                "SELECT file_name, list_sort(list(name || ' ' || type || ' ' || coalesce(logical_type, '')))::VARCHAR
                 FROM parquet_schema({list}) GROUP BY file_name"
            ))?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        let mut columns_of: HashMap<&str, Vec<(String, String)>> = HashMap::new();
        let mut footers = Vec::with_capacity(paths.len());
        for path in paths {
            let name = path.display().to_string();
            let signature = signatures.get(&name).map(String::as_str).unwrap_or_default();
            if !columns_of.contains_key(signature) {
                let columns = conn
                    .prepare(&format!(
                        "DESCRIBE SELECT * FROM read_parquet({}, hive_partitioning = false)",
                        quoted(&name)
                    ))?
                    .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
                    .collect::<Result<Vec<_>, _>>()?;
                columns_of.insert(signature, columns);
            }
            footers.push(ParquetFooter {
                rows: rows.get(&name).copied().unwrap_or(0) as u64,
                metadata: metadata.remove(&name).unwrap_or_default(),
                columns: columns_of[signature].clone(),
            });
        }
        Ok(footers)
    }

    /// Reads the lake's `files` into this (empty, scratch) database: the
    /// rows started inside `horizon`, deduplicated as every engine does
    /// (`queries/lake/dedup.sql`), left for derivation as one write per
    /// bucket. Derive with `catch_up`, then read as any database.
    pub fn load_lake(&self, files: LakeFiles, horizon: Horizon) -> Result<LakeLoad, StoreError> {
        let (targets, sources) = stored_from_lake();
        let absent = self.absent_added_columns(&files)?;
        self.conn.execute_batch(MACROS)?;
        self.in_transaction(|conn| {
            conn.execute_batch(&format!(
                "CREATE OR REPLACE TEMP VIEW lake_rows AS SELECT *{absent} FROM {} WHERE {};",
                files.sql(),
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

    /// `, NULL::TYPE AS name` for each added column none of `files` holds
    /// (a lake every file of which predates it): read by name, a column no
    /// file has is not there at all.
    pub(super) fn absent_added_columns(&self, files: &LakeFiles) -> Result<String, StoreError> {
        let held: std::collections::HashSet<String> = self
            .conn
            .prepare(&format!("DESCRIBE SELECT * FROM {}", files.sql()))?
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<Result<_, _>>()?;
        Ok(self
            .lake_schema()?
            .into_iter()
            .filter(|(name, _)| ADDED_LAKE_COLUMNS.contains(&name.as_str()) && !held.contains(name))
            .map(|(name, data_type)| format!(", NULL::{data_type} AS {name}"))
            .collect())
    }

    /// Distinct attempts of the workflows `workflows` selects in the
    /// scratch database that the lake holds outside `horizon`: what a
    /// window report over the horizon did not read.
    pub fn lake_outside_horizon(
        &self,
        files: LakeFiles,
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
                files = files.sql(),
                inside = horizon.condition(),
                selected = selected.join(" AND "),
            ),
            [],
            |r| r.get(0),
        )?;
        Ok(outside as u64)
    }
}

/// What `begin_export` decided.
struct Plan {
    after: i64,
    through: i64,
    offset: i64,
    export_id: String,
    again: bool,
    rebased_over: Option<i64>,
}

/// The first line of an engine's message: the rest is its context dump.
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or(text).trim().to_string()
}

fn exported_through(conn: &duckdb::Connection, lake_id: &str) -> Result<i64, StoreError> {
    Ok(exported(conn, lake_id)?.0)
}

/// The writes the lake `lake_id` holds of this database (every one up to
/// this number), and the offset of its last export there.
fn exported(conn: &duckdb::Connection, lake_id: &str) -> Result<(i64, i64), StoreError> {
    Ok(conn.query_row(
        "SELECT coalesce(max(through_seq), 0), coalesce(arg_max(coalesce(lake_offset, 0), through_seq), 0)
         FROM lake_exports WHERE lake_id = ? AND finished_at IS NOT NULL",
        [lake_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?)
}

/// A struct literal of `metadata` for `KV_METADATA`.
fn kv_literal(metadata: &[(&str, String)]) -> String {
    metadata
        .iter()
        .map(|(key, value)| format!("{}: {}", quoted(key), quoted(value)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `prefix` and `bytes` random bytes in hex.
fn random_hex(prefix: &str, bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    // The clock is a fallback for a system without a random source.
    if getrandom::fill(&mut buf).is_err() {
        let nanos = Utc::now().timestamp_nanos_opt().unwrap_or(0).to_le_bytes();
        buf.iter_mut().zip(nanos.iter().cycle()).for_each(|(b, n)| *b = *n);
    }
    format!("{prefix}{}", buf.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// A node id for a database started without `--node-id`: random, so two
/// nodes never share one by accident.
fn new_node_id() -> String {
    random_hex("node", 4)
}
