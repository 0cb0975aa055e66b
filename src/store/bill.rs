//! The bill's tables (docs/reconcile.md): imports of the provider's
//! exports, replacing what they overlap, and the sums a reconciliation
//! reads, ledger side and provider side, in one snapshot.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use duckdb::types::{TimeUnit, Value};
use duckdb::{Connection, params};

use super::Store;
use super::columns::{row_struct, timestamp_column};
use super::error::StoreError;
use attempt_core::bill::BillPages;
use attempt_core::pricing::PriceTable;
use attempt_core::reconcile::Grain;

const GROUPS_SQL: &str = include_str!("../../queries/reconcile_groups.sql");
const LEDGER_SQL: &str = include_str!("../../queries/reconcile_ledger.sql");
const BILLED_SQL: &str = include_str!("../../queries/reconcile_billed.sql");

/// What an import did: the buckets and facts it stored, and those of
/// earlier imports it replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BillImport {
    pub buckets: u64,
    pub facts: u64,
    pub replaced_buckets: u64,
    pub replaced_facts: u64,
}

/// The time a reconciliation reads: attempts in `[since, until)`, facts of
/// the whole cells `[cells_from, cells_until)` around it.
#[derive(Debug, Clone, Copy)]
pub struct ReconcileScope {
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub grain: Grain,
}

impl ReconcileScope {
    pub fn cells_from(&self) -> DateTime<Utc> {
        self.grain.floor(self.since)
    }

    pub fn cells_until(&self) -> DateTime<Utc> {
        self.grain.ceil(self.until)
    }
}

row_struct! {
    /// `reconcile_ledger.sql`'s row.
    #[derive(Debug, Clone, PartialEq)]
    pub struct LedgerRow {
        pub provider: String,
        pub cell_start: DateTime<Utc> => timestamp_column,
        pub billing_account: Option<String>,
        pub model: String,
        pub service_tier: Option<String>,
        pub attempts: i64,
        pub billable_attempts: i64,
        pub unbilled_failures: i64,
        pub input_tokens: i128,
        pub cached_input_tokens: i128,
        pub cache_write_input_tokens: i128,
        pub output_tokens: i128,
        pub cost_pusd: i128,
        pub unknown_cost_attempts: i64,
        pub unbilled_cost_pusd: i128,
        pub repriced_pusd: i128,
        pub unrepriced_attempts: i64,
    }
}

row_struct! {
    /// `reconcile_billed.sql`'s row.
    #[derive(Debug, Clone, PartialEq)]
    pub struct BilledRow {
        pub source: String,
        pub provider: String,
        pub cell_start: DateTime<Utc> => timestamp_column,
        pub kind: String,
        pub billing_account: Option<String>,
        pub model: Option<String>,
        pub service_tier: Option<String>,
        pub currency: Option<String>,
        pub detail: Option<String>,
        pub facts: i64,
        pub requests: Option<i64>,
        pub input_tokens: i128,
        pub cached_input_tokens: i128,
        pub cache_write_input_tokens: i128,
        pub output_tokens: i128,
        pub amount_pico: i128,
        pub tokens_priced_pusd: i128,
        pub unpriced_facts: i64,
    }
}

/// A stored bucket of a source that overlaps the scope's cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBucket {
    pub source: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// Everything a reconciliation reads, from one commit.
#[derive(Debug, Clone, Default)]
pub struct ReconcileRows {
    pub ledger: Vec<LedgerRow>,
    pub billed: Vec<BilledRow>,
    pub buckets: Vec<StoredBucket>,
}

fn micros(t: DateTime<Utc>) -> Value {
    Value::Timestamp(TimeUnit::Microsecond, t.timestamp_micros())
}

impl Store {
    /// Stores an import of `pages`, first deleting the buckets of its
    /// source that overlap its own (and their facts): re-importing a window
    /// replaces it, and import order never matters. All or nothing.
    pub fn import_bill(&self, pages: &BillPages) -> Result<BillImport, StoreError> {
        let source = pages.source.name();
        let provider = pages.source.provider();
        self.in_transaction(|conn| {
            conn.execute_batch(
                "CREATE OR REPLACE TEMP TABLE import_buckets (bucket_start TIMESTAMP, bucket_end TIMESTAMP);",
            )?;
            {
                let mut appender = conn.appender_to_catalog_and_db("import_buckets", "temp", "main")?;
                for b in &pages.buckets {
                    appender.append_row(params![micros(b.start), micros(b.end)])?;
                }
                appender.flush()?;
            }
            let overlapping = |table: &str| {
                format!(
                    "DELETE FROM {table} t WHERE t.source = ? AND EXISTS (
                         SELECT 1 FROM temp.import_buckets i
                         WHERE t.bucket_start < i.bucket_end AND i.bucket_start < t.bucket_end)"
                )
            };
            let replaced_facts = conn.execute(&overlapping("bill_facts"), params![source])? as u64;
            let replaced_buckets = conn.execute(&overlapping("bill_buckets"), params![source])? as u64;
            conn.execute(
                "INSERT INTO bill_buckets (source, provider, bucket_start, bucket_end)
                 SELECT ?, ?, bucket_start, bucket_end FROM temp.import_buckets",
                params![source, provider],
            )?;
            {
                let mut appender = conn.appender("bill_facts")?;
                for f in &pages.facts {
                    let kind: &str = f.kind.into();
                    appender.append_row(params![
                        source,
                        provider,
                        micros(f.bucket.start),
                        micros(f.bucket.end),
                        kind,
                        f.billing_account,
                        f.api_key_id,
                        f.model,
                        f.service_tier,
                        f.detail,
                        f.requests,
                        f.tokens.input,
                        f.tokens.cached_input,
                        f.tokens.cache_write_input,
                        f.tokens.output,
                        f.amount.as_ref().map(|m| m.currency.as_str()),
                        f.amount.as_ref().map(|m| m.pico),
                        f.tokens.cache_write_1h_input,
                        f.web_search_requests,
                        f.prompt_over,
                    ])?;
                }
                appender.flush()?;
            }
            conn.execute_batch("DROP TABLE temp.import_buckets;")?;
            Ok(BillImport {
                buckets: pages.buckets.len() as u64,
                facts: pages.facts.len() as u64,
                replaced_buckets,
                replaced_facts,
            })
        })
    }

    /// The sums of one reconciliation, in one snapshot.
    pub fn reconcile_rows(
        &self,
        scope: &ReconcileScope,
        prices: &PriceTable,
    ) -> Result<ReconcileRows, StoreError> {
        self.in_transaction(|conn| {
            set_variables(conn, scope)?;
            // One pass over the scope's attempts; what follows reads its sums.
            conn.execute_batch(GROUPS_SQL)?;
            load_models(conn, prices)?;
            load_prices(conn, prices)?;
            let ledger = query(conn, LEDGER_SQL)?;
            conn.execute_batch("DROP TABLE temp.reconcile_groups;")?;
            let billed = query(conn, BILLED_SQL)?;
            let buckets = conn
                .prepare(
                    "SELECT source, bucket_start, bucket_end FROM bill_buckets
                     WHERE bucket_start < getvariable('reconcile_cells_until')
                       AND bucket_end > getvariable('reconcile_cells_from')
                     ORDER BY source, bucket_start",
                )?
                .query_map([], |r| {
                    Ok(StoredBucket {
                        source: r.get(0)?,
                        start: timestamp_column(r, "bucket_start")?,
                        end: timestamp_column(r, "bucket_end")?,
                    })
                })?
                .collect::<Result<_, _>>()?;
            Ok(ReconcileRows { ledger, billed, buckets })
        })
    }
}

fn set_variables(conn: &Connection, scope: &ReconcileScope) -> Result<(), StoreError> {
    for (name, value) in [
        ("reconcile_since", scope.since),
        ("reconcile_until", scope.until),
        ("reconcile_cells_from", scope.cells_from()),
        ("reconcile_cells_until", scope.cells_until()),
    ] {
        conn.execute(&format!("SET VARIABLE {name} = ?::TIMESTAMP"), params![micros(value)])?;
    }
    conn.execute("SET VARIABLE reconcile_grain = ?", params![scope.grain.name()])?;
    Ok(())
}

/// `temp.reconcile_models`: every (provider, model) either side names in
/// the scope (the attempts' from `temp.reconcile_groups`), with the name
/// its cells use.
fn load_models(conn: &Connection, prices: &PriceTable) -> Result<(), StoreError> {
    let pairs: BTreeSet<(String, String)> = conn
        .prepare(
            "SELECT DISTINCT served_provider, served_model FROM temp.reconcile_groups
             UNION
             SELECT DISTINCT billing_provider, billed_model FROM temp.reconcile_groups
             WHERE billing_provider = 'openrouter'
             UNION
             SELECT DISTINCT provider, model FROM bill_facts
             WHERE model IS NOT NULL
               AND bucket_start >= getvariable('reconcile_cells_from')
               AND bucket_start < getvariable('reconcile_cells_until')",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    conn.execute_batch(
        "CREATE OR REPLACE TEMP TABLE reconcile_models (provider VARCHAR, model VARCHAR, cell_model VARCHAR);",
    )?;
    let mut appender = conn.appender_to_catalog_and_db("reconcile_models", "temp", "main")?;
    for (provider, model) in &pairs {
        appender.append_row(params![provider, model, prices.cell_model(provider, model)])?;
    }
    appender.flush()?;
    Ok(())
}

/// `temp.prices` for the price key of every attempt in the scope (of
/// `temp.reconcile_groups`) and of every usage fact in its cells: both
/// sides priced by the one rule.
fn load_prices(conn: &Connection, prices: &PriceTable) -> Result<(), StoreError> {
    super::prices::create(conn)?;
    super::prices::price_keys(
        conn,
        prices,
        "SELECT DISTINCT served_provider, served_model, price_key FROM temp.reconcile_groups
         UNION
         SELECT DISTINCT provider, model, bill_price_key(bucket_start, service_tier, prompt_over, billing_account)
         FROM bill_facts
         WHERE kind = 'usage' AND model IS NOT NULL
           AND bucket_start >= getvariable('reconcile_cells_from')
           AND bucket_start < getvariable('reconcile_cells_until')",
    )
}

fn query<T: super::columns::FromRow>(conn: &Connection, sql: &str) -> Result<Vec<T>, StoreError> {
    let began = std::time::Instant::now();
    let rows = conn.prepare(sql)?.query_map([], T::from_row)?.collect::<Result<Vec<_>, _>>()?;
    tracing::debug!(rows = rows.len(), elapsed_ms = began.elapsed().as_millis() as u64, "reconcile query");
    Ok(rows)
}

row_struct! {
    /// What a provider served one day on one price tier and prompt size:
    /// the billable attempts of one served model (`Store::served_by_day`).
    #[derive(Debug, Clone, PartialEq)]
    pub struct ServedRow {
        pub served_provider: String,
        pub served_model: String,
        pub day: DateTime<Utc> => timestamp_column,
        /// The price tier (`standard`, `flex`, `batch`, ...).
        pub tier: String,
        /// The prompt size their prompts exceed (0: none): a long-context
        /// price's.
        pub prompt_over: i64,
        pub requests: i64,
        pub input_tokens: i128,
        pub cached_input_tokens: i128,
        pub cache_write_input_tokens: i128,
        pub cache_write_1h_input_tokens: i128,
        pub output_tokens: i128,
    }
}

impl Store {
    /// The billable attempts (all but failures without output) by served
    /// provider, model, UTC day, price tier and prompt size: what a
    /// simulated provider bills.
    pub fn served_by_day(&self) -> Result<Vec<ServedRow>, StoreError> {
        query(
            &self.conn,
            "SELECT served_provider, served_model, date_trunc('day', started_at) AS day,
                    price_key_of(started_at, batch, service_tier, input_tokens, NULL).tier AS tier,
                    price_key_of(started_at, batch, service_tier, input_tokens, NULL).over::BIGINT AS prompt_over,
                    count(*)::BIGINT AS requests,
                    coalesce(sum(input_tokens), 0)::HUGEINT AS input_tokens,
                    coalesce(sum(cached_input_tokens), 0)::HUGEINT AS cached_input_tokens,
                    coalesce(sum(cache_write_input_tokens), 0)::HUGEINT AS cache_write_input_tokens,
                    coalesce(sum(cache_write_1h_input_tokens), 0)::HUGEINT AS cache_write_1h_input_tokens,
                    coalesce(sum(output_tokens), 0)::HUGEINT AS output_tokens
             FROM attempts
             WHERE NOT (status = 'error' AND coalesce(output_tokens, 0) = 0)
             GROUP BY ALL ORDER BY ALL",
        )
    }
}
