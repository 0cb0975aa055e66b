//! The only module that talks to DuckDB: schema, bulk writes, report queries.
//!
//! `Store` wraps one connection. DuckDB's `Connection` is `Send` but not
//! `Sync`, so a process holds one `Store` per thread; `try_clone` opens
//! another connection to the same database (readers beside one writer).

// The one module that talks to DuckDB (clippy.toml's disallowed-methods).
#![allow(clippy::disallowed_methods)]

mod alerts;
pub mod bill;
pub mod columns;
mod cost;
mod derived;
mod derived_tables;
mod deriver;
mod env;
mod error;
mod functions;
mod known;
mod lake;
mod lake_report;
pub mod memory;
mod migrate;
mod prices;
pub mod queries;
mod shapes;
mod snapshot;
mod temp;
pub mod tune;
mod writer;

use std::path::Path;
use std::sync::{Arc, Mutex};

use duckdb::Connection;

pub use deriver::{Pending, QuarantineRow, ROUND_ROWS, Round};
pub use env::{DEFAULT_LABEL_LIMIT, LABEL_LIMIT_ENV, MEMORY_LIMIT_ENV};
use error::open_error;
pub use error::{EXIT_DAMAGED_WAL, StoreError};
pub use lake::{ADDED_LAKE_COLUMNS, ExportSlice, Horizon, LakeFiles, LakeLoad, ParquetFooter, Partition};
pub use lake_report::{LAKE_QUERIES, LakeReportRows};
pub use memory::{Job, MemoryLimit};
pub use migrate::{MIGRATIONS, schema_version};
pub use prices::PriceNeed;
pub use queries::{Query, ReportRows};
pub use snapshot::Snapshot;
pub use writer::{AttemptRows, Batch, MAX_LISTED_CONFLICTS, MAX_SPANS_PER_TRACE, PreparedBatch, WriteStats};

use chrono::{DateTime, Utc};

use attempt_core::alert_event::AlertEvent;
use attempt_core::dimensions::Dimension;
use attempt_core::model::Attempt;
use attempt_core::pricing::PriceTable;
use attempt_core::providers::ProviderAliases;
use attempt_core::request::ReportFilter;

/// What a file that exists is, by its first bytes: DuckDB files carry
/// `DUCK` at offset 8. Anything else is refused before DuckDB reads it
/// (DuckDB would take an SQLite file for an attachment and reach for an
/// extension over the network).
fn check_is_duckdb(path: &Path) -> Result<(), StoreError> {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(path) else { return Ok(()) };
    let mut head = [0u8; 16];
    let read = file.read(&mut head).unwrap_or(0);
    if read == 0 || (read >= 12 && &head[8..12] == b"DUCK") {
        return Ok(());
    }
    let what = if head.starts_with(b"SQLite format 3") { "an SQLite database" } else { "not a DuckDB file" };
    Err(StoreError::NotDuckDb { path: path.display().to_string(), what })
}

/// DuckDB's settings for every database this program opens: extensions
/// are never installed or loaded behind the user's back (no network, no
/// code that was not built in).
fn config(mode: duckdb::AccessMode) -> Result<duckdb::Config, duckdb::Error> {
    duckdb::Config::default()
        .access_mode(mode)?
        .enable_autoload_extension(false)?
        .with("autoinstall_known_extensions", "false")
}

/// The log size past which a commit checkpoints (DuckDB's default is 16MB).
/// A log this large replays in a few seconds at the next open after a crash.
pub const CHECKPOINT_THRESHOLD: &str = "256MB";

/// The log size past which an idle derivation loop checkpoints.
pub const IDLE_CHECKPOINT_BYTES: u64 = 16 << 20;

/// Runs `work` in one transaction: committed if it succeeds, rolled back if
/// it fails. The work's own error is the answer even when the rollback
/// fails too (the connection's next BEGIN finds out), so a read never
/// hides why it failed behind a failed rollback.
fn in_transaction<T>(
    conn: &Connection,
    work: impl FnOnce(&Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    conn.execute_batch("BEGIN TRANSACTION")?;
    match work(conn) {
        Ok(value) => {
            conn.execute_batch("COMMIT")?;
            Ok(value)
        }
        Err(err) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(err)
        }
    }
}

/// DuckDB's human-readable sizes (`16.2 MiB`, `0 bytes`) in bytes.
fn parse_size(text: &str) -> u64 {
    let mut parts = text.split_whitespace();
    let number: f64 = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0.0);
    let unit = match parts.next().unwrap_or("bytes") {
        "KiB" | "KB" => 1u64 << 10,
        "MiB" | "MB" => 1 << 20,
        "GiB" | "GB" => 1 << 30,
        "TiB" | "TB" => 1 << 40,
        _ => 1,
    };
    (number * unit as f64) as u64
}

fn label_limit() -> Result<u64, StoreError> {
    match std::env::var(LABEL_LIMIT_ENV) {
        Err(_) => Ok(DEFAULT_LABEL_LIMIT),
        Ok(text) => text.trim().parse().ok().filter(|k| *k >= 1).ok_or(StoreError::LabelLimit(text)),
    }
}

/// First and last instant of something stored (an inclusive time range).
pub type TimeBounds = (DateTime<Utc>, DateTime<Utc>);
/// One workflow's attempts and the breaker intervals they met.
pub type WorkflowRows = (Vec<queries::WorkflowAttemptRow>, Vec<queries::WorkflowCircuitRow>);

/// What the writer keeps between writes: shared by every connection of a
/// `Store`, held for a whole write, so writes are numbered in commit order.
struct WriteState {
    /// Attempt ids the database may hold.
    attempts: known::IdFilter,
    /// The number the next write's rows get.
    next_seq: i64,
}

/// What an acknowledged write stored.
#[derive(Debug, Default)]
pub struct Stored {
    /// Per batch, in order.
    pub stats: Vec<WriteStats>,
    /// The write's number, when it stored any row (a write of duplicates
    /// only leaves nothing to derive).
    pub seq: Option<i64>,
    /// Rows it stored (attempts and spans): what derivation has to do.
    pub rows: u64,
}

/// What `catch_up` derived.
#[derive(Debug, Default, Clone, Copy)]
pub struct CatchUp {
    pub rounds: u64,
    pub workflows: u64,
    pub quarantined: u64,
    /// Whether it derived everything again in one set-based pass (a bulk
    /// import at least as large as what was stored before).
    pub rebuilt: bool,
}

/// Below this many pending rows, `catch_up` derives in rounds; above it,
/// and at least half of what is stored, one set-based pass over every
/// workflow costs less than rounds that each look up old facts.
const BULK_PENDING_ROWS: u64 = 2 * ROUND_ROWS;

pub struct Store {
    conn: Connection,
    /// Maps received provider spellings to canonical names on write.
    aliases: Arc<ProviderAliases>,
    /// The writer's filter and numbering; loaded on the first write.
    write_state: Arc<Mutex<Option<WriteState>>>,
    /// Workflow ids with derived facts (a derivation round's filter);
    /// loaded on the first round.
    workflow_ids: Arc<Mutex<Option<known::IdFilter>>>,
    /// K: values of each label with rollup rows of their own.
    label_limit: u64,
}

impl Store {
    /// Opens (creating if needed) the database at `path` and brings its
    /// schema up to date.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with(path, duckdb::AccessMode::ReadWrite, &MemoryLimit::for_job(Job::Serve))
    }

    /// `open`, for a bulk job under `limit` (`MemoryLimit::for_job(Job::Bulk)`,
    /// which the command prints first).
    pub fn open_for_job(path: &Path, limit: &MemoryLimit) -> Result<Self, StoreError> {
        Self::open_with(path, duckdb::AccessMode::ReadWrite, limit)
    }

    /// `open`, for commands that only read (report, audit, alerts): a
    /// database file this process may not write is opened read-only, as
    /// long as it needs no migration (a read-only file cannot be upgraded).
    pub fn open_for_reading(path: &Path) -> Result<Self, StoreError> {
        // Mode bits first: root may write a 0444 file, but its owner said not to.
        let marked = std::fs::metadata(path).is_ok_and(|m| m.permissions().readonly());
        let denied = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied);
        if marked || denied {
            Self::open_with(path, duckdb::AccessMode::ReadOnly, &MemoryLimit::for_job(Job::Serve))
        } else {
            Self::open(path)
        }
    }

    fn open_with(path: &Path, mode: duckdb::AccessMode, limit: &MemoryLimit) -> Result<Self, StoreError> {
        check_is_duckdb(path)?;
        let read_only = matches!(mode, duckdb::AccessMode::ReadOnly);
        let conn = config(mode)
            .and_then(|config| Connection::open_with_flags(path, config))
            .map_err(|source| open_error(path, source))?;
        // A file database can spill to disk, so DuckDB's memory is bounded
        // (`memory`): a rebuild over millions of attempts sorts on disk
        // rather than taking the machine's memory.
        conn.execute_batch(&format!("SET memory_limit = '{}';", limit.setting.replace('\'', "")))
            .map_err(|source| StoreError::MemoryLimit { value: limit.setting.clone(), source })?;
        // DuckDB checkpoints inside the commit that takes its log past this
        // size, stalling that commit (and the other connections' behind it)
        // for seconds on a large database: the derivation loop checkpoints
        // when it is idle instead (`checkpoint_if_idle`), and this is the
        // bound under sustained load.
        if read_only {
            return Self::init_read_only(conn, path);
        }
        conn.execute_batch(&format!("SET checkpoint_threshold = '{CHECKPOINT_THRESHOLD}';"))?;
        Self::init(conn)
    }

    /// A store over a read-only file: nothing is migrated or derived, so
    /// the schema must be current; writes still pending derivation are
    /// left out of what is read (the report's `derivation` section says so).
    fn init_read_only(conn: Connection, path: &Path) -> Result<Self, StoreError> {
        let label_limit = label_limit()?;
        let found = migrate::schema_version(&conn)?;
        let latest = MIGRATIONS.last().map_or(0, |m| m.version);
        if found != latest {
            return Err(StoreError::ReadOnlyStale {
                path: path.display().to_string(),
                why: format!("its schema is version {found}, this attempt-ledger reads version {latest}"),
            });
        }
        functions::register(&conn)?;
        derived::define_macros(&conn)?;
        prices::define(&conn)?;
        Ok(Self {
            conn,
            aliases: Arc::new(ProviderAliases::builtin()),
            write_state: Arc::new(Mutex::new(None)),
            workflow_ids: Arc::new(Mutex::new(None)),
            label_limit,
        })
    }

    pub fn open_in_memory() -> Result<Self, StoreError> {
        Self::init(Connection::open_in_memory()?)
    }

    fn init(conn: Connection) -> Result<Self, StoreError> {
        let label_limit = label_limit()?;
        let applied = migrate::migrate(&conn, MIGRATIONS)?;
        functions::register(&conn)?;
        writer::create_scratch(&conn)?;
        derived::create_scratch(&conn, label_limit)?;
        prices::define(&conn)?;
        let store = Self {
            conn,
            aliases: Arc::new(ProviderAliases::builtin()),
            write_state: Arc::new(Mutex::new(None)),
            workflow_ids: Arc::new(Mutex::new(None)),
            label_limit,
        };
        if applied.contains(&migrate::CANONICAL_PROVIDERS_VERSION) {
            // Rows stored before canonical names existed get them now.
            store.reapply_aliases()?;
        }
        // A rebuild or a derivation killed half-way (or writes a crash left
        // underived) is finished before anything reads.
        store.rebuild_if_stale()?;
        store.catch_up()?;
        Ok(store)
    }

    /// Another connection to the same database, for a reader or writer on
    /// another thread.
    pub fn try_clone(&self) -> Result<Self, StoreError> {
        let conn = self.conn.try_clone()?;
        functions::register(&conn)?;
        writer::create_scratch(&conn)?;
        derived::create_scratch(&conn, self.label_limit)?;
        prices::define(&conn)?;
        Ok(Self {
            conn,
            aliases: self.aliases.clone(),
            write_state: self.write_state.clone(),
            workflow_ids: self.workflow_ids.clone(),
            label_limit: self.label_limit,
        })
    }

    /// K for this connection from now on (values already admitted stay);
    /// `LABEL_LIMIT_ENV` sets it for a process.
    pub fn with_label_limit(mut self, label_limit: u64) -> Result<Self, StoreError> {
        if label_limit == 0 {
            return Err(StoreError::LabelLimit("0".to_string()));
        }
        self.conn.execute_batch(&format!("SET VARIABLE label_limit = {label_limit}::BIGINT;"))?;
        derived::define_kept_label(&self.conn)?;
        self.label_limit = label_limit;
        Ok(self)
    }

    /// Writes map provider spellings through `aliases` from now on (the
    /// shipped table is the default).
    pub fn with_aliases(mut self, aliases: ProviderAliases) -> Self {
        self.aliases = Arc::new(aliases);
        self
    }

    /// Maps every stored row's received provider spellings through the
    /// alias table again, and derives everything again if a name moved;
    /// returns the rows whose names changed.
    pub fn reapply_aliases(&self) -> Result<u64, StoreError> {
        let rows = self.in_transaction(|conn| {
            let rows = writer::reapply_aliases(conn, &self.aliases)?;
            if rows > 0 {
                conn.execute_batch("UPDATE derived_state SET stale = true;")?;
            }
            Ok(rows)
        })?;
        self.rebuild_if_stale()?;
        Ok(rows)
    }

    fn in_transaction<T>(
        &self,
        work: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        in_transaction(&self.conn, work)
    }

    /// Whether the derived tables lag the attempts (a bulk import under
    /// way, or killed half-way).
    pub fn derived_stale(&self) -> Result<bool, StoreError> {
        Ok(self.conn.query_row("SELECT bool_or(stale) FROM derived_state", [], |r| r.get(0))?)
    }

    fn rebuild_if_stale(&self) -> Result<(), StoreError> {
        if self.derived_stale()? {
            self.rebuild_derived()?;
        }
        Ok(())
    }

    /// Recomputes every derived table (per-workflow facts, rollups, totals)
    /// from the stored attempts, in one transaction; returns the workflows.
    pub fn rebuild_derived(&self) -> Result<u64, StoreError> {
        self.rebuild_derived_in_parts(derived::REBUILD_PART_ATTEMPTS)
    }

    /// `rebuild_derived`, deriving about `attempts_per_part` attempts per
    /// pass (whole workflows each; tests use small parts). Quarantined
    /// workflows are tried again (and set aside again if they still fail).
    #[doc(hidden)]
    pub fn rebuild_derived_in_parts(&self, attempts_per_part: u64) -> Result<u64, StoreError> {
        let began = std::time::Instant::now();
        // Marked stale first, each pass its own commit, cleared last: a
        // rebuild killed half-way is done again at the next open. Pending
        // traces become attempts first: the passes derive from attempts.
        let slabs = self.in_transaction(|conn| {
            let upper = deriver::newest_seq(conn)?;
            let from = deriver::derived_seq(conn)?;
            deriver::derive_traces(conn, &self.aliases, from, upper)?;
            conn.execute("UPDATE derived_state SET stale = true, derived_seq = ?", [upper])?;
            conn.execute_batch("DELETE FROM quarantine;")?;
            for t in &derived_tables::PER_WORKFLOW {
                conn.execute_batch(&format!("DELETE FROM {};", t.table))?;
            }
            derived::rebuild_slabs(conn, attempts_per_part)
        })?;
        let mut workflows = 0;
        for (part, slab) in slabs.iter().enumerate() {
            let derived = self.rebuild_isolating(*slab)?;
            tracing::debug!(part, parts = slabs.len(), workflows = derived, "rebuild pass");
            workflows += derived;
        }
        self.in_transaction(|conn| {
            derived::rebuild_rollups(conn)?;
            conn.execute_batch("UPDATE derived_state SET stale = false; DROP TABLE temp.workflow_span;")?;
            Ok(())
        })?;
        // The facts changed under the round's filter: it is loaded again.
        *self.workflow_ids.lock().unwrap_or_else(|p| p.into_inner()) = None;
        tracing::debug!(workflows, elapsed_ms = began.elapsed().as_millis() as u64, "derived tables rebuilt");
        Ok(workflows)
    }

    /// One rebuild pass; should it fail on a value no rule handles, its
    /// workflows are derived in halves until each failure is one workflow,
    /// which is quarantined.
    fn rebuild_isolating(&self, slab: derived::Slab) -> Result<u64, StoreError> {
        match self.in_transaction(|conn| derived::rebuild_pass(conn, derived::PassOf::Slab(slab))) {
            Ok(derived) => return Ok(derived),
            Err(err) if deriver::is_data_error(&err) => {
                tracing::warn!(error = %err, "a rebuild pass failed on its data; isolating the workflow")
            }
            Err(err) => return Err(err),
        }
        let mut groups = vec![derived::slab_workflows(&self.conn, slab)?];
        let mut workflows = 0;
        while let Some(mut group) = groups.pop() {
            match self.in_transaction(|conn| derived::rebuild_pass(conn, derived::PassOf::Ids(&group))) {
                Ok(derived) => workflows += derived,
                Err(err) if deriver::is_data_error(&err) && group.len() > 1 => {
                    let second = group.split_off(group.len() / 2);
                    groups.push(group);
                    groups.push(second);
                }
                Err(err) if deriver::is_data_error(&err) => {
                    tracing::warn!(workflow_id = %group[0], error = %err, "workflow quarantined");
                    self.in_transaction(|conn| deriver::quarantine(conn, &group[0], &err.to_string()))?;
                }
                Err(err) => return Err(err),
            }
        }
        Ok(workflows)
    }

    /// Deletes the workflows whose first attempt started before `before`,
    /// their attempts and derived rows, and checkpoints (DuckDB reuses the
    /// freed blocks, but the file keeps its size: `compact_into` shrinks
    /// it); returns (workflows, attempts) deleted.
    pub fn prune(&self, before: DateTime<Utc>) -> Result<(u64, u64), StoreError> {
        let deleted = self.in_transaction(|conn| derived::prune(conn, before))?;
        // The filters still hold the deleted ids: harmless, but loaded
        // again, smaller, on the next write and round.
        *self.write_state.lock().unwrap_or_else(|p| p.into_inner()) = None;
        *self.workflow_ids.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.conn.execute_batch("CHECKPOINT;")?;
        Ok(deleted)
    }

    /// Copies every table into a new database file at `target` (which must
    /// not exist): the copy holds only live rows, so after a prune it is
    /// smaller. The caller swaps the files once this store is closed.
    pub fn compact_into(&self, target: &Path) -> Result<(), StoreError> {
        let current: String = self.conn.query_row("SELECT current_database()", [], |r| r.get(0))?;
        let quote = |text: &str| text.replace('\'', "''");
        let ident = |text: &str| text.replace('"', "\"\"");
        self.conn.execute_batch(&format!(
            "CHECKPOINT;
             ATTACH '{target}' AS compacted;
             COPY FROM DATABASE \"{current}\" TO compacted;
             DETACH compacted;",
            target = quote(&target.display().to_string()),
            current = ident(&current),
        ))?;
        Ok(())
    }

    /// An order-independent checksum of each derived table (row count and
    /// the sum of its rows' hashes): equal for equal contents.
    pub fn derived_checksum(&self) -> Result<Vec<(i64, i128)>, StoreError> {
        derived_tables::all()
            .map(|table| {
                let sql =
                    format!("SELECT count(*), coalesce(sum(hash(t::VARCHAR)::HUGEINT), 0) FROM {table} t");
                Ok(self.conn.query_row(&sql, [], |r| Ok((r.get(0)?, r.get(1)?)))?)
            })
            .collect()
    }

    /// Every derived table as sorted lines of text: two databases holding
    /// the same attempts give the same digest (tests, `rebuild`).
    pub fn derived_digest(&self) -> Result<Vec<String>, StoreError> {
        let mut lines = Vec::new();
        for table in derived_tables::all() {
            let mut stmt = self.conn.prepare(&format!("SELECT t::VARCHAR FROM {table} t ORDER BY 1"))?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            for row in rows {
                lines.push(format!("{table} {}", row?));
            }
        }
        Ok(lines)
    }

    /// Loads the id filters now, so the first write and the first
    /// derivation round do not wait for a scan of every stored id.
    pub fn load_known_ids(&self) -> Result<(), StoreError> {
        drop(self.write_state()?);
        drop(self.workflow_filter()?);
        Ok(())
    }

    /// The writer's state, loaded on first use. Held for a whole write:
    /// one writer at a time per database, so writes are numbered, filtered
    /// and committed in one order.
    fn write_state(&self) -> Result<std::sync::MutexGuard<'_, Option<WriteState>>, StoreError> {
        let mut guard = self.write_state.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            let next_seq = deriver::newest_seq(&self.conn)? + 1;
            *guard = Some(WriteState { attempts: known::load_attempt_ids(&self.conn)?, next_seq });
        }
        Ok(guard)
    }

    fn workflow_filter(&self) -> Result<std::sync::MutexGuard<'_, Option<known::IdFilter>>, StoreError> {
        let mut guard = self.workflow_ids.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(known::load_workflow_ids(&self.conn)?);
        }
        Ok(guard)
    }

    /// Makes room in the attempt-id filter for `records` more ids (a bulk
    /// import, sized from its input).
    pub fn expect_records(&self, records: u64) -> Result<(), StoreError> {
        if let Some(state) = self.write_state()?.as_mut() {
            state.attempts.reserve(records as usize);
        }
        Ok(())
    }

    /// Stores attempt records in one transaction, skipping those already
    /// stored, and derives what they touched.
    pub fn write_batch(&self, attempts: &[Attempt]) -> Result<WriteStats, StoreError> {
        let batch = Batch { attempts, ..Batch::default() };
        Ok(self.write_batches(&[batch])?.pop().unwrap_or_default())
    }

    /// Ends a transaction an interrupted write left open, if any.
    pub fn rollback_open_transaction(&self) -> Result<(), StoreError> {
        if !self.conn.is_autocommit() {
            self.conn.execute_batch("ROLLBACK")?;
        }
        Ok(())
    }

    /// Rewrites the one row of `writer_probe`: a commit of a few bytes, to
    /// learn whether the database can be written again after a failure.
    pub fn probe_write(&self) -> Result<(), StoreError> {
        self.conn.execute_batch(
            "BEGIN; DELETE FROM writer_probe; INSERT INTO writer_probe VALUES (now()); COMMIT;",
        )?;
        Ok(())
    }

    /// Stores several batches in one transaction (group commit), then
    /// derives everything pending: what a program that writes and reads on
    /// one thread wants. Each batch gets its own counts, an id being new
    /// for the first batch that has it.
    pub fn write_batches(&self, batches: &[Batch]) -> Result<Vec<WriteStats>, StoreError> {
        let stored = self.store_batches(batches)?;
        self.catch_up()?;
        Ok(stored.stats)
    }

    /// Stores several batches in one transaction and returns once it
    /// committed: the acknowledgement. Deriving what they touched is left
    /// to `derive_round` / `catch_up` (the rows carry the write's number).
    pub fn store_batches(&self, batches: &[Batch]) -> Result<Stored, StoreError> {
        let rows: Vec<AttemptRows> =
            batches.iter().map(|b| self.rows_of(b.attempts)).collect::<Result<_, _>>()?;
        let prepared: Vec<PreparedBatch> = batches
            .iter()
            .zip(&rows)
            .map(|(b, rows)| PreparedBatch { rows, spans: b.spans, circuits: b.circuits })
            .collect();
        self.store_prepared(&prepared)
    }

    /// `attempts` as the rows a write appends, with this store's provider
    /// aliases (for a thread that decodes while another writes).
    pub fn rows_of(&self, attempts: &[Attempt]) -> Result<AttemptRows, StoreError> {
        AttemptRows::new(attempts, &self.aliases)
    }

    /// The provider alias table writes apply.
    pub fn aliases(&self) -> Arc<ProviderAliases> {
        self.aliases.clone()
    }

    /// `store_batches` for rows already built (`rows_of`).
    pub fn store_prepared(&self, batches: &[PreparedBatch]) -> Result<Stored, StoreError> {
        let mut guard = self.write_state()?;
        let Some(state) = guard.as_mut() else { unreachable!("write_state loads it") };
        let seq = state.next_seq;
        let mut context = writer::WriteContext { known: &mut state.attempts, seq, aliases: &self.aliases };
        let (stats, rows) = writer::write_batches(&self.conn, &mut context, batches)?;
        if rows > 0 {
            state.next_seq += 1;
        }
        Ok(Stored { stats, seq: (rows > 0).then_some(seq), rows })
    }

    /// Derives the oldest pending writes, about `max_rows` rows of them (at
    /// least one write), in one transaction; `None` when nothing is pending.
    pub fn derive_round(&self, max_rows: u64) -> Result<Option<Round>, StoreError> {
        let mut guard = self.workflow_filter()?;
        let Some(workflows) = guard.as_mut() else { unreachable!("workflow_filter loads it") };
        let mut context = deriver::DeriveContext { aliases: &self.aliases, workflows };
        deriver::derive_round(&self.conn, &mut context, max_rows)
    }

    /// Derives every pending write: in rounds, or, when what is pending is
    /// large and at least half of what is stored (a bulk import), in one
    /// set-based rebuild.
    pub fn catch_up(&self) -> Result<CatchUp, StoreError> {
        let pending = self.pending()?;
        let mut done = CatchUp::default();
        if pending.is_empty() {
            return Ok(done);
        }
        let rows = pending.attempts + pending.spans;
        if rows >= BULK_PENDING_ROWS && rows.saturating_mul(2) >= self.attempt_count()? {
            done.workflows = self.rebuild_derived()?;
            done.quarantined = self.quarantined_count()?;
            done.rebuilt = true;
            return Ok(done);
        }
        while let Some(round) = self.derive_round(ROUND_ROWS)? {
            done.rounds += 1;
            done.workflows += round.workflows;
            done.quarantined += round.quarantined;
        }
        Ok(done)
    }

    /// Checkpoints when the write-ahead log holds more than
    /// `IDLE_CHECKPOINT_BYTES` (for a loop with nothing else to do); returns
    /// whether it did. A checkpoint another transaction prevents is left for
    /// the next idle moment.
    pub fn checkpoint_if_idle(&self) -> Result<bool, StoreError> {
        let wal: Option<String> =
            self.conn.query_row("SELECT wal_size FROM pragma_database_size()", [], |r| r.get(0)).ok();
        let bytes = wal.as_deref().map_or(0, parse_size);
        if bytes <= IDLE_CHECKPOINT_BYTES {
            return Ok(false);
        }
        let began = std::time::Instant::now();
        match self.conn.execute_batch("CHECKPOINT;") {
            Ok(()) => {
                tracing::debug!(
                    wal_bytes = bytes,
                    elapsed_ms = began.elapsed().as_millis() as u64,
                    "idle checkpoint"
                );
                Ok(true)
            }
            Err(err) => {
                tracing::debug!(error = %err, "idle checkpoint skipped");
                Ok(false)
            }
        }
    }

    /// What is stored and not derived yet.
    pub fn pending(&self) -> Result<Pending, StoreError> {
        deriver::pending(&self.conn)
    }

    /// The workflows set aside because their derivation failed, oldest
    /// first.
    pub fn quarantined(&self) -> Result<Vec<QuarantineRow>, StoreError> {
        deriver::quarantined(&self.conn)
    }

    pub fn quarantined_count(&self) -> Result<u64, StoreError> {
        deriver::quarantined_count(&self.conn)
    }

    /// Runs every report query over the workflows `filter` selects.
    pub fn report_rows(&self, filter: &ReportFilter, prices: &PriceTable) -> Result<ReportRows, StoreError> {
        self.report_rows_of(filter, prices, &Query::ALL)
    }

    /// Runs `work` in one read transaction (`Snapshot`): every read of one
    /// answer sees the same commit.
    pub fn snapshot<T>(
        &self,
        prices: &PriceTable,
        work: impl FnOnce(&Snapshot) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.in_transaction(|conn| work(&Snapshot::new(conn, prices)))
    }

    /// Runs the report `queries` only; the rows of the others are empty.
    pub fn report_rows_of(
        &self,
        filter: &ReportFilter,
        prices: &PriceTable,
        queries: &[Query],
    ) -> Result<ReportRows, StoreError> {
        self.snapshot(prices, |snapshot| snapshot.report_rows(filter, queries))
    }

    /// The reads of one `tune` answer, in one snapshot: `work` gets the
    /// scope of `filter` prepared (`tune::TuneScope`). `names` says which
    /// workflow names the answer tells apart: a name the rollups fold past
    /// the label limit makes every read take the workflows from their own
    /// rows, names whole.
    pub fn tune_read<T>(
        &self,
        filter: &ReportFilter,
        prices: &PriceTable,
        names: tune::Names,
        work: impl FnOnce(&tune::TuneScope) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.snapshot(prices, |snapshot| snapshot.tune(filter, names, work))
    }

    /// Every attempt of one workflow, in its order, with what the
    /// derivation decided of each (route, delivered, cost kind) and its
    /// cost, and the breaker intervals its routes were in while it ran;
    /// empty when no workflow has this id. The workflow is derived
    /// again here by `facts.sql`, on this connection's temp tables, so the
    /// page shows exactly the rules the reports count with.
    pub fn workflow_attempts(
        &self,
        workflow_id: &str,
        prices: &PriceTable,
    ) -> Result<WorkflowRows, StoreError> {
        self.snapshot(prices, |snapshot| self.derive_one_workflow(snapshot, workflow_id))
    }

    fn derive_one_workflow(
        &self,
        snapshot: &Snapshot,
        workflow_id: &str,
    ) -> Result<WorkflowRows, StoreError> {
        let range: Option<(i64, i64)> = self
            .conn
            .prepare(
                "SELECT epoch_us(earliest_at), epoch_us(last_at) FROM workflow_facts WHERE workflow_id = ? LIMIT 1",
            )?
            .query_map([workflow_id], |r| Ok((r.get(0)?, r.get(1)?)))?
            .next()
            .transpose()?;
        let Some((from, until)) = range else { return Ok((Vec::new(), Vec::new())) };
        derived::create_scratch(&self.conn, self.label_limit)?;
        let at = |us: i64| chrono::DateTime::from_timestamp_micros(us);
        derived::set_time_variable(&self.conn, "fact_from", at(from))?;
        derived::set_time_variable(&self.conn, "fact_until", at(until))?;
        self.conn.execute_batch("CREATE OR REPLACE TEMP TABLE detail_workflow (workflow_id VARCHAR);")?;
        self.conn.execute("INSERT INTO temp.detail_workflow VALUES (?)", [workflow_id])?;
        self.conn.execute_batch(
            "CREATE OR REPLACE TEMP VIEW fact_input AS
             SELECT * FROM temp.attempt_dims
             WHERE started_at >= getvariable('fact_from') AND started_at <= getvariable('fact_until')
               AND workflow_id IN (SELECT workflow_id FROM temp.detail_workflow);",
        )?;
        self.conn.execute_batch(derived::FACTS_SQL)?;
        snapshot.priced()?;
        let rows = queries::workflow_rows(&self.conn)?;
        let circuits = queries::workflow_circuit_rows(&self.conn)?;
        self.conn.execute_batch(derived::DROP_FACT_SCRATCH)?;
        self.conn.execute_batch(&derived_tables::drop_new())?;
        self.conn.execute_batch("DROP VIEW temp.fact_input; DROP TABLE temp.detail_workflow;")?;
        Ok((rows, circuits))
    }

    /// The recovery findings of the workflows `filter` selects
    /// (`queries/audit.sql`), in one transaction.
    pub fn audit(
        &self,
        filter: &attempt_core::request::AuditFilter,
        prices: &PriceTable,
    ) -> Result<Vec<queries::AuditRow>, StoreError> {
        self.snapshot(prices, |snapshot| snapshot.audit_rows(filter))
    }

    /// The minutes of the oldest and the newest workflow's first attempt
    /// (the dashboard's default range fits them when they are older than a
    /// day).
    pub fn data_minutes(&self) -> Result<Option<TimeBounds>, StoreError> {
        let (oldest, newest): (Option<i64>, Option<i64>) = self.conn.query_row(
            "SELECT epoch_us(min(minute)), epoch_us(max(minute)) FROM rollup_workflows",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok(oldest
            .and_then(DateTime::from_timestamp_micros)
            .zip(newest.and_then(DateTime::from_timestamp_micros)))
    }

    /// Workflows by outcome, and attempts and cost by served provider, per
    /// bucket of `range` (`queries/timeseries.sql`), in one transaction.
    pub fn timeseries(
        &self,
        range: &attempt_core::request::SeriesRange,
        prices: &PriceTable,
    ) -> Result<Vec<queries::SeriesRow>, StoreError> {
        self.snapshot(prices, |snapshot| snapshot.series_rows(range))
    }

    /// The configured dimensions, in slot order.
    pub fn dimensions(&self) -> Result<Vec<Dimension>, StoreError> {
        Ok(derived::load_dimensions(&self.conn)?.into_iter().map(|(_, d)| d).collect())
    }

    /// Replaces the configured dimensions and derives every fact and
    /// rollup again with them (their values of the old ones are forgotten,
    /// and so are the admitted values of their labels).
    pub fn set_dimensions(&self, dimensions: &[Dimension]) -> Result<(), StoreError> {
        attempt_core::dimensions::check(dimensions).map_err(|e| StoreError::Dimension(e.to_string()))?;
        self.in_transaction(|conn| {
            conn.execute_batch(
                "DELETE FROM dimensions;
                 DELETE FROM label_values WHERE label IN ('dim1', 'dim2', 'dim3');
                 UPDATE derived_state SET stale = true;",
            )?;
            for (i, d) in dimensions.iter().enumerate() {
                conn.execute(
                    "INSERT INTO dimensions VALUES (?, ?, ?)",
                    duckdb::params![i as i32 + 1, d.name, d.source.to_string()],
                )?;
            }
            Ok(())
        })?;
        derived::define_attempt_dims(&self.conn)?;
        self.rebuild_derived()?;
        Ok(())
    }

    /// The stored-data samples of `/metrics` over every stored workflow, in
    /// one transaction (histogram bounds: `model::LATENCY_BUCKETS`).
    pub fn metric_rows(&self, prices: &PriceTable) -> Result<Vec<queries::MetricRow>, StoreError> {
        self.snapshot(prices, |snapshot| snapshot.metric_rows())
    }

    /// One report query's result as an aligned text table, for snapshots
    /// and debugging.
    pub fn query_table(
        &self,
        query: Query,
        filter: &ReportFilter,
        prices: &PriceTable,
    ) -> Result<String, StoreError> {
        queries::prepare_scope(&self.conn, filter, prices)?;
        queries::price_primaries(&self.conn, &[query], prices)?;
        queries::pretty(&self.conn, query, filter)
    }

    /// Appends one alert state change to the history.
    pub fn record_alert_event(&self, event: &AlertEvent) -> Result<(), StoreError> {
        alerts::record(&self.conn, event)
    }

    /// The newest `limit` alert events, newest first.
    pub fn alert_history(&self, limit: usize) -> Result<Vec<AlertEvent>, StoreError> {
        alerts::history(&self.conn, limit)
    }

    /// Alerts whose last recorded state is firing (to resume after a restart).
    pub fn open_alerts(&self) -> Result<Vec<AlertEvent>, StoreError> {
        alerts::open(&self.conn)
    }

    /// First and last `started_at` stored; `None` when there is no attempt.
    pub fn attempt_bounds(&self) -> Result<Option<TimeBounds>, StoreError> {
        alerts::attempt_bounds(&self.conn)
    }

    /// The label values that keep rows of their own, by label then value
    /// (tests; `queries/admit.sql` fills them).
    pub fn admitted_labels(&self) -> Result<Vec<(String, String)>, StoreError> {
        let mut stmt = self.conn.prepare("SELECT label, value FROM label_values ORDER BY 1, 2")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn attempt_count(&self) -> Result<u64, StoreError> {
        Ok(self.conn.query_row("SELECT count(*) FROM attempts", [], |row| row.get::<_, i64>(0))? as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duckdb_sizes_read_as_bytes() {
        assert_eq!(parse_size("0 bytes"), 0);
        assert_eq!(parse_size("256.0 KiB"), 262_144);
        assert_eq!(parse_size("16.5 MiB"), 17_301_504);
        assert_eq!(parse_size("nonsense"), 0);
    }

    /// Every headroom field is stored in its own column, absent as NULL.
    #[test]
    fn headroom_is_stored_field_by_field() {
        let line = r#"{"workflow_id":"w","started_at":"2026-11-28T02:00:00Z","provider":"openai","model":"gpt-4o",
            "status":"error","http_status":429,"ratelimit_remaining_tokens":0,"ratelimit_limit_tokens":30000,
            "ratelimit_reset_tokens_ms":1500}"#;
        let attempt = attempt_core::ingest::jsonl::decode_line(&line.replace('\n', " ")).unwrap();
        let store = Store::open_in_memory().unwrap();
        store.write_batch(&[attempt]).unwrap();
        let names: Vec<&str> = attempt_core::ratelimit::FIELDS.iter().map(|(name, _, _)| *name).collect();
        let row: Vec<Option<i64>> = store
            .conn
            .query_row(&format!("SELECT {} FROM attempts", names.join(", ")), [], |r| {
                (0..names.len()).map(|i| r.get(i)).collect()
            })
            .unwrap();
        let expected: Vec<Option<i64>> = names
            .iter()
            .map(|n| match *n {
                "ratelimit_remaining_tokens" => Some(0),
                "ratelimit_limit_tokens" => Some(30000),
                "ratelimit_reset_tokens_ms" => Some(1500),
                _ => None,
            })
            .collect();
        assert_eq!(row, expected);
    }

    /// A database written before canonical provider names gets them when
    /// it is opened, and keeps the spelling it had.
    #[test]
    fn opening_an_older_database_canonicalises_its_providers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.duckdb");
        {
            let conn = Connection::open(&path).unwrap();
            migrate::migrate(&conn, &MIGRATIONS[..2]).unwrap();
            conn.execute_batch(
                "INSERT INTO attempts (attempt_id, workflow_id, started_at, provider, model, status, layer,
                                       served_provider, served_model, commit_state)
                 VALUES ('a', 'w', TIMESTAMP '2026-11-28 02:00:00', 'azure', 'gpt-4o', 'ok', 'app',
                         'bedrock', 'claude-sonnet-4-5', 'none')",
            )
            .unwrap();
        }
        let store = Store::open(&path).unwrap();
        let row: (String, String, String, String) = store
            .conn
            .query_row(
                "SELECT provider, served_provider, provider_received, served_provider_received FROM attempts",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .unwrap();
        assert_eq!(row, ("azure.ai.openai".into(), "aws.bedrock".into(), "azure".into(), "bedrock".into()));
        // ... and the derived tables the reports read, built from its attempts.
        let facts: (String, String) = store
            .conn
            .query_row("SELECT workflow_id, outcome FROM workflow_facts", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        assert_eq!(facts, ("w".into(), "primary_success".into()));
        assert!(!store.derived_stale().unwrap());
    }

    /// Spans stored before ids were checked, with ids of other lengths, had
    /// attempt ids that two pairs could share: opening the database names
    /// each pair's attempt apart and derives both.
    #[test]
    fn opening_a_database_with_odd_span_ids_derives_their_attempts_under_ids_apart() {
        use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
        use opentelemetry_proto::tonic::trace::v1::Span as OtlpSpan;
        use prost::Message;

        let attr = |key: &str, value: Value| KeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(value) }),
            ..KeyValue::default()
        };
        let record = |trace: &[u8], span: &[u8]| {
            let otlp = OtlpSpan {
                trace_id: trace.to_vec(),
                span_id: span.to_vec(),
                name: "chat".into(),
                start_time_unix_nano: 1_795_831_200_000_000_000,
                end_time_unix_nano: 1_795_831_200_250_000_000,
                attributes: vec![
                    attr("gen_ai.operation.name", Value::StringValue("chat".into())),
                    attr("gen_ai.provider.name", Value::StringValue("openai".into())),
                    attr("gen_ai.request.model", Value::StringValue("gpt-4o-mini".into())),
                    attr("gen_ai.usage.input_tokens", Value::IntValue(10)),
                ],
                ..OtlpSpan::default()
            };
            let hex = |b: &[u8]| b.iter().map(|b| format!("{b:02x}")).collect::<String>();
            attempt_core::model::SpanRecord {
                trace_id: hex(trace),
                span_id: hex(span),
                parent_span_id: None,
                kind: attempt_core::model::SpanKind::Model,
                facts: attempt_core::ingest::otlp::facts_of(&otlp),
                span: Some(otlp.encode_to_vec()),
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("odd.duckdb");
        {
            let store = Store::open(&path).unwrap();
            let spans = [
                record(&[0xaa, 0xbb, 0xcc], &[0xdd, 0xee, 0xff, 0x00, 0x11]),
                record(&[0xaa, 0xbb, 0xcc, 0xdd], &[0xee, 0xff, 0x00, 0x11]),
            ];
            store.write_batches(&[Batch { spans: &spans, ..Batch::default() }]).unwrap();
            // As an earlier build (schema 12) left them: one id for both
            // pairs, the second taken for a redelivery of the first.
            store
                .conn
                .execute_batch(
                    "DELETE FROM attempts WHERE workflow_id = 'aabbccdd';
                     UPDATE attempts SET attempt_id = replace(attempt_id, ':', '');
                     DELETE FROM schema_migrations WHERE version >= 13;
                     ALTER TABLE workflow_findings ADD COLUMN seq BIGINT;
                     ALTER TABLE workflow_findings ADD COLUMN offset_ms DOUBLE;
                     ALTER TABLE workflow_findings ADD COLUMN prev_offset_ms DOUBLE;
                     DROP TABLE lake_node; DROP TABLE lake_exports; DROP TABLE workflow_steps;
                     DROP TABLE rollup_steps; DROP TABLE total_steps;
                     DROP TABLE shape_steps; DROP TABLE total_shapes; DROP TABLE workflow_times;
                     DROP TABLE database_identity; DROP TABLE bill_buckets; DROP TABLE bill_facts;
                     DROP TABLE workflow_headroom; DROP TABLE circuit_changes;
                     ALTER TABLE workflow_spend DROP COLUMN off_primary;
                     ALTER TABLE workflow_spend DROP COLUMN limit_kind;
                     ALTER TABLE rollup_attempts DROP COLUMN limit_kind;
                     ALTER TABLE total_attempts DROP COLUMN limit_kind;
                     ALTER TABLE attempts DROP COLUMN batch;
                     ALTER TABLE attempts DROP COLUMN cache_write_1h_input_tokens;
                     ALTER TABLE attempts DROP COLUMN web_search_requests;
                     ALTER TABLE workflow_spend DROP COLUMN price_key;
                     ALTER TABLE workflow_spend DROP COLUMN priced_kinds;
                     ALTER TABLE workflow_spend DROP COLUMN cache_write_1h_input_tokens;
                     ALTER TABLE workflow_spend DROP COLUMN web_search_requests;
                     ALTER TABLE rollup_attempts DROP COLUMN price_key;
                     ALTER TABLE rollup_attempts DROP COLUMN priced_kinds;
                     ALTER TABLE rollup_attempts DROP COLUMN cache_write_1h_input_tokens;
                     ALTER TABLE rollup_attempts DROP COLUMN web_search_requests;
                     ALTER TABLE total_attempts DROP COLUMN price_key;
                     ALTER TABLE total_attempts DROP COLUMN priced_kinds;
                     ALTER TABLE total_attempts DROP COLUMN cache_write_1h_input_tokens;
                     ALTER TABLE total_attempts DROP COLUMN web_search_requests;
                     ALTER TABLE workflow_findings DROP COLUMN price_key;
                     ALTER TABLE workflow_findings DROP COLUMN priced_kinds;
                     ALTER TABLE workflow_findings DROP COLUMN reasoning_output_tokens;
                     ALTER TABLE workflow_findings DROP COLUMN cache_write_1h_input_tokens;
                     ALTER TABLE workflow_findings DROP COLUMN web_search_requests;
                     ALTER TABLE rollup_findings DROP COLUMN price_key;
                     ALTER TABLE rollup_findings DROP COLUMN priced_kinds;
                     ALTER TABLE rollup_findings DROP COLUMN reasoning_output_tokens;
                     ALTER TABLE rollup_findings DROP COLUMN cache_write_1h_input_tokens;
                     ALTER TABLE rollup_findings DROP COLUMN web_search_requests;
                     ALTER TABLE workflow_spend DROP COLUMN reasoning_output_tokens;
                     ALTER TABLE rollup_attempts DROP COLUMN reasoning_output_tokens;
                     ALTER TABLE total_attempts DROP COLUMN reasoning_output_tokens;
                     ALTER TABLE attempts DROP COLUMN reasoning_output_tokens;
                     ALTER TABLE attempts DROP COLUMN cost_currency;
                     ALTER TABLE attempts DROP COLUMN billing_account;
                     ALTER TABLE attempts DROP COLUMN service_tier;
                     ALTER TABLE attempts DROP COLUMN ratelimit_remaining_requests;
                     ALTER TABLE attempts DROP COLUMN ratelimit_limit_requests;
                     ALTER TABLE attempts DROP COLUMN ratelimit_reset_requests_ms;
                     ALTER TABLE attempts DROP COLUMN ratelimit_remaining_tokens;
                     ALTER TABLE attempts DROP COLUMN ratelimit_limit_tokens;
                     ALTER TABLE attempts DROP COLUMN ratelimit_reset_tokens_ms;
                     ALTER TABLE attempts DROP COLUMN ratelimit_remaining_input_tokens;
                     ALTER TABLE attempts DROP COLUMN ratelimit_limit_input_tokens;
                     ALTER TABLE attempts DROP COLUMN ratelimit_reset_input_tokens_ms;
                     ALTER TABLE attempts DROP COLUMN ratelimit_remaining_output_tokens;
                     ALTER TABLE attempts DROP COLUMN ratelimit_limit_output_tokens;
                     ALTER TABLE attempts DROP COLUMN ratelimit_reset_output_tokens_ms;
                     ALTER TABLE workflow_facts DROP COLUMN outcome_ms;
                     ALTER TABLE workflow_facts DROP COLUMN shape_key;",
                )
                .unwrap();
        }
        let store = Store::open(&path).unwrap();
        let ids: Vec<String> = store
            .conn
            .prepare("SELECT attempt_id FROM attempts ORDER BY 1")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(ids, ["aabbcc:ddeeff0011", "aabbccdd:eeff0011"]);
        let workflows: i64 =
            store.conn.query_row("SELECT count(*) FROM workflow_facts", [], |r| r.get(0)).unwrap();
        assert_eq!(workflows, 2);
    }
}
