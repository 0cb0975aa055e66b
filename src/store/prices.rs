//! `temp.prices`: what the price table answers for each price key a read
//! needs (docs/prices.md). The rule lives in `attempt_core::pricing`; the
//! store asks it once per distinct key (a served provider and model, a
//! day, a tier, a prompt size and a billing account) and every query joins
//! on the key, so DuckDB never re-derives a price and the SQL never
//! re-states the rule.
//!
//! Columns of temp.prices: served_provider, served_model, price_key
//! STRUCT(day, tier, over, account); price STRUCT(input, cached_input,
//! cache_write, cache_write_1h, output, reasoning_output, web_search),
//! pico-USD per token (per search), NULL when unpriced; unpriced
//! (no_price | no_tier_price); region_dropped (the entry matched only once
//! the model's region was dropped); as_of (the row's day); entry_model (the
//! entry's name).

use chrono::{Duration, NaiveDate};
use duckdb::types::Value;
use duckdb::{Connection, params};

use super::error::StoreError;

/// The pricing macros (an attempt's price key, its cost from the key's
/// prices) every query that prices reads.
const COST_SQL: &str = include_str!("../../queries/cost.sql");
use attempt_core::pricing::{PriceKey, PriceTable, Resolved};

/// What the price table answered, a row per key; `temp.prices` is the view
/// of it the queries join on. Both live as long as the connection
/// (`define`): a read only empties and refills the rows, where creating
/// the tables and the macros cost every read a dozen statements.
const PRICE_ROWS: &str = "CREATE TEMP TABLE IF NOT EXISTS price_rows (
        served_provider VARCHAR, served_model VARCHAR, day DATE, tier VARCHAR, over INTEGER, account VARCHAR,
        input BIGINT, cached_input BIGINT, cache_write BIGINT, cache_write_1h BIGINT, output BIGINT,
        reasoning_output BIGINT, web_search BIGINT,
        unpriced VARCHAR, region_dropped BOOLEAN, as_of DATE, entry_model VARCHAR);
    CREATE OR REPLACE TEMP VIEW prices AS
    SELECT served_provider, served_model, {'day': day, 'tier': tier, 'over': over, 'account': account} AS price_key,
           CASE WHEN unpriced IS NULL THEN
                {'input': input, 'cached_input': cached_input, 'cache_write': cache_write,
                 'cache_write_1h': cache_write_1h, 'output': output, 'reasoning_output': reasoning_output,
                 'web_search': web_search} END AS price,
           unpriced, region_dropped, as_of, entry_model
    FROM temp.price_rows;";

/// Defines, once per connection, the pricing macros (`COST_SQL`) and the
/// empty `temp.prices`.
pub(super) fn define(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch(COST_SQL)?;
    conn.execute_batch(PRICE_ROWS)?;
    Ok(())
}

/// `temp.prices` for every key the stored attempts have (`total_attempts`
/// holds each once per day, tier, size and account).
pub(super) fn load(conn: &Connection, table: &PriceTable) -> Result<(), StoreError> {
    create(conn)?;
    append_keys(
        conn,
        table,
        "SELECT DISTINCT served_provider, served_model, price_key FROM total_attempts WHERE price_key IS NOT NULL",
    )
}

/// An empty `temp.prices`.
pub(super) fn create(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch("DELETE FROM temp.price_rows;")?;
    Ok(())
}

/// Adds to `temp.prices` the keys `keys_sql` selects (columns
/// served_provider, served_model, price_key) that it lacks: what a query
/// prices besides the stored attempts' own keys (a primary's price for the
/// tokens its fallback used; a bill's cells).
pub(super) fn price_keys(conn: &Connection, table: &PriceTable, keys_sql: &str) -> Result<(), StoreError> {
    append_keys(
        conn,
        table,
        &format!(
            "SELECT * FROM ({keys_sql}) k
             WHERE NOT EXISTS (SELECT 1 FROM temp.prices p
                               WHERE p.served_provider = k.served_provider AND p.served_model = k.served_model
                                 AND p.price_key IS NOT DISTINCT FROM k.price_key)"
        ),
    )
}

/// Appends the price of every key `keys_sql` selects, which `temp.prices`
/// lacks.
fn append_keys(conn: &Connection, table: &PriceTable, keys_sql: &str) -> Result<(), StoreError> {
    let wanted: Vec<(String, String, i64, String, i64, Option<String>)> = conn
        .prepare(&format!(
            "SELECT served_provider, served_model, date_diff('day', DATE '1970-01-01', price_key.day),
                    price_key.tier, price_key.over, price_key.account
             FROM ({keys_sql}) k"
        ))?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))?
        .collect::<Result<_, _>>()?;
    if wanted.is_empty() {
        return Ok(());
    }
    let mut appender = conn.appender_to_catalog_and_db("price_rows", "temp", "main")?;
    for (provider, model, days, tier, over, account) in &wanted {
        let day = epoch_day(*days);
        let key =
            PriceKey { provider, model, day, tier, prompt_over: *over, billing_account: account.as_deref() };
        let resolved = table.resolve(&key);
        let (prices, unpriced, region_dropped, as_of, entry) = match &resolved {
            Ok(Resolved { prices, region_dropped, row, model, .. }) => {
                (Some(*prices), None, *region_dropped, row.as_of, Some(model.as_str()))
            }
            Err(why) => (None, Some(why.name()), false, None, None),
        };
        let p = prices.unwrap_or_default();
        appender.append_row(params![
            provider,
            model,
            Value::Date32(*days as i32),
            tier,
            *over as i32,
            account,
            p.input,
            p.cached_input,
            p.cache_write,
            p.cache_write_1h,
            p.output,
            p.reasoning_output,
            p.web_search,
            unpriced,
            region_dropped,
            as_of.map(|d| Value::Date32(days_since_epoch(d))),
            entry,
        ])?;
    }
    appender.flush()?;
    Ok(())
}

fn epoch_day(days: i64) -> NaiveDate {
    NaiveDate::default() + Duration::days(days)
}

fn days_since_epoch(day: NaiveDate) -> i32 {
    (day - NaiveDate::default()).num_days() as i32
}

/// What the stored attempts priced from their tokens needed of the price
/// table, per served model, price key and kinds used (`prices check`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriceNeed {
    pub served_provider: String,
    pub served_model: String,
    pub day: NaiveDate,
    pub tier: String,
    pub prompt_over: i64,
    pub billing_account: Option<String>,
    /// `priced_kinds`: a bit per kind of token used.
    pub kinds: u8,
    pub attempts: i64,
    /// Their input plus output tokens.
    pub tokens: i128,
}

impl super::Store {
    /// The price needs of the attempts that started in `[since, until)` (all
    /// when unbounded), quarantined workflows apart.
    pub fn price_needs(
        &self,
        since: Option<chrono::DateTime<chrono::Utc>>,
        until: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<Vec<PriceNeed>, StoreError> {
        let micros = |t: Option<chrono::DateTime<chrono::Utc>>| {
            t.map(|t| Value::Timestamp(duckdb::types::TimeUnit::Microsecond, t.timestamp_micros()))
        };
        let mut statement = self.conn.prepare(
            "SELECT served_provider, served_model, date_diff('day', DATE '1970-01-01', k.day), k.tier, k.over,
                    k.account, kinds, count(*)::BIGINT,
                    coalesce(sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0)), 0)::HUGEINT
             FROM (SELECT *, price_key_of(started_at, batch, service_tier, input_tokens, billing_account) AS k,
                          priced_kinds_of(kind, input_tokens, cached_input_tokens, cache_write_input_tokens,
                                          cache_write_1h_input_tokens, output_tokens, reasoning_output_tokens,
                                          web_search_requests) AS kinds
                   FROM (SELECT *, cost_kind_of(cost_pusd, cost_currency, status, input_tokens, output_tokens,
                                                cached_input_tokens, cache_write_input_tokens,
                                                web_search_requests) AS kind
                         FROM attempts
                         WHERE (?::TIMESTAMP IS NULL OR started_at >= ?::TIMESTAMP)
                           AND (?::TIMESTAMP IS NULL OR started_at < ?::TIMESTAMP)
                           AND workflow_id NOT IN (SELECT workflow_id FROM quarantine)))
             WHERE kind = 'priced'
             GROUP BY ALL
             ORDER BY ALL",
        )?;
        let (since, until) = (micros(since), micros(until));
        let rows = statement
            .query_map(duckdb::params![since, since, until, until], |r| {
                Ok(PriceNeed {
                    served_provider: r.get(0)?,
                    served_model: r.get(1)?,
                    day: epoch_day(r.get(2)?),
                    tier: r.get(3)?,
                    prompt_over: r.get(4)?,
                    billing_account: r.get(5)?,
                    kinds: r.get(6)?,
                    attempts: r.get(7)?,
                    tokens: r.get(8)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }
}
