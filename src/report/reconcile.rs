//! The reconciliation's answer (docs/reconcile.md): the store's sums per
//! finest cell merged into cells over the dimensions both sides carry,
//! each cell's drift split into causes (`attempt_core::reconcile`), and
//! roll-ups by day, by model and for the window. Money is written as exact
//! decimal JSON numbers.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::ser::Serializer;

use crate::store::bill::{BilledRow, LedgerRow, ReconcileRows, ReconcileScope, StoredBucket};
use attempt_core::bill::BillSource;
use attempt_core::bill::money::decimal_text;
use attempt_core::reconcile::{
    BilledSide, CellTime, LedgerSide, Status, TokenSums, Tolerance, decompose, hidden_requests, status,
};

/// The most cells an answer lists (largest drift first among the rest
/// ordered by time); totals and roll-ups always count every cell.
pub const MAX_LISTED_CELLS: usize = 10_000;

/// Pico-dollars written as an exact decimal JSON number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Usd(pub i128);

impl Serialize for Usd {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let raw = serde_json::value::RawValue::from_string(decimal_text(self.0))
            .map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

impl std::fmt::Display for Usd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&decimal_text(self.0))
    }
}

fn usd(v: Option<i128>) -> Option<Usd> {
    v.map(Usd)
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, Default)]
pub struct Tokens {
    pub input: i128,
    pub cached_input: i128,
    pub cache_write_input: i128,
    pub output: i128,
}

impl From<TokenSums> for Tokens {
    fn from(t: TokenSums) -> Self {
        Self {
            input: t.input,
            cached_input: t.cached_input,
            cache_write_input: t.cache_write_input,
            output: t.output,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct LedgerJson {
    pub attempts: i64,
    pub billable_attempts: i64,
    pub unbilled_failures: i64,
    pub tokens: Tokens,
    pub cost_usd: Option<Usd>,
    pub unknown_cost_attempts: i64,
    pub repriced_usd: Option<Usd>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BilledJson {
    pub requests: Option<i64>,
    pub tokens: Option<Tokens>,
    pub cost_usd: Option<Usd>,
    pub tokens_priced_usd: Option<Usd>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CausesJson {
    pub unbilled_failures: Option<Usd>,
    pub emitter_cost: Option<Usd>,
    pub tokens: Option<Usd>,
    pub price: Option<Usd>,
    pub unexplained: Option<Usd>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub provider: String,
    pub billing_account: Option<String>,
    pub model: Option<String>,
    pub service_tier: Option<String>,
    pub status: &'static str,
    pub ledger: LedgerJson,
    pub billed: BilledJson,
    pub drift_usd: Option<Usd>,
    /// Drift over the provider's cost, in percent; null when it billed 0.
    pub drift_pct: Option<f64>,
    pub causes: CausesJson,
    pub hidden_requests: Option<i64>,
}

/// Sums over settled, compared cells (`Status::is_settled_comparison`).
#[derive(Debug, Clone, Serialize, Default)]
pub struct Rollup {
    pub key: Option<String>,
    pub cells: u64,
    pub ledger_cost_usd: Usd,
    pub billed_cost_usd: Usd,
    pub drift_usd: Usd,
    pub drift_pct: Option<f64>,
    pub causes: RollupCauses,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct RollupCauses {
    pub unbilled_failures: Usd,
    pub emitter_cost: Usd,
    pub tokens: Usd,
    pub price: Usd,
    pub unexplained: Usd,
}

#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    #[serde(flatten)]
    pub all: Rollup,
    /// Cells by status, all of them (those left out of the sums too).
    pub cells_by_status: BTreeMap<&'static str, u64>,
    pub by_day: Vec<Rollup>,
    pub by_model: Vec<Rollup>,
    pub by_provider: Vec<Rollup>,
}

/// A cost that is not tokens, or not in USD: shown, never compared.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct OtherCost {
    pub provider: String,
    pub kind: String,
    pub detail: Option<String>,
    pub currency: String,
    pub amount: Usd,
}

/// Which dimensions a provider's cells use: carried by every fact of its
/// exports in the window and by every attempt billed to it.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Dimensions {
    pub billing_account: bool,
    pub model: bool,
    pub service_tier: bool,
}

/// Ledger attempts billed to a provider none of whose exports is imported
/// for the window.
#[derive(Debug, Clone, Serialize)]
pub struct NotImported {
    pub provider: String,
    pub attempts: i64,
    pub cost_usd: Option<Usd>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Reconciliation {
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub grain: &'static str,
    pub dimensions: BTreeMap<String, Dimensions>,
    pub cells: Vec<Cell>,
    pub cells_total: u64,
    pub cells_listed: u64,
    pub largest: Vec<Cell>,
    pub totals: Totals,
    pub other_costs: Vec<OtherCost>,
    pub not_imported: Vec<NotImported>,
}

/// What the comparison is asked beyond the stored sums.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub tolerance: Tolerance,
    /// Cells that end after this are unsettled.
    pub settled_before: DateTime<Utc>,
}

/// The exports that give a provider's cost and its usage.
fn sources_of(provider: &str) -> Option<(BillSource, BillSource)> {
    match provider {
        "openai" => Some((BillSource::OpenaiCosts, BillSource::OpenaiUsage)),
        "anthropic" => Some((BillSource::AnthropicCost, BillSource::AnthropicUsage)),
        "openrouter" => Some((BillSource::OpenrouterActivity, BillSource::OpenrouterActivity)),
        _ => None,
    }
}

/// How a source's stored buckets cover a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cover {
    /// No bucket of the source, or only buckets wider than the cell (daily
    /// costs under hour cells): the source says nothing about the cell.
    None,
    Partial,
    Full,
}

fn cover(buckets: &[&StoredBucket], start: DateTime<Utc>, end: DateTime<Utc>) -> Cover {
    let length = end - start;
    let mut covered = chrono::Duration::zero();
    let mut straddles = false;
    for b in buckets.iter().filter(|b| b.start < end && start < b.end) {
        if b.start <= start && b.end >= end && b.end - b.start > length {
            return Cover::None;
        }
        straddles |= b.start < start || b.end > end;
        covered += b.end.min(end) - b.start.max(start);
    }
    if covered.is_zero() {
        Cover::None
    } else if covered == length && !straddles {
        Cover::Full
    } else {
        Cover::Partial
    }
}

type CellKey = (String, DateTime<Utc>, Option<String>, Option<String>, Option<String>);

#[derive(Default)]
struct Sides {
    ledger: LedgerSide,
    requests: Option<i64>,
    tokens: TokenSums,
    tokens_priced: i128,
    unpriced_usage: bool,
    cost: i128,
    billed_anything: bool,
}

pub fn reconcile(rows: ReconcileRows, scope: &ReconcileScope, options: Options) -> Reconciliation {
    let grain = scope.grain;
    let providers_imported: BTreeSet<String> = rows
        .buckets
        .iter()
        .filter_map(|b| b.source.parse::<BillSource>().ok())
        .map(|s| s.provider().to_string())
        .collect();
    let dimensions = dimensions_of(&rows, &providers_imported);
    let mut cells: BTreeMap<CellKey, Sides> = BTreeMap::new();
    let mut not_imported: BTreeMap<String, (i64, i128, bool)> = BTreeMap::new();
    for row in &rows.ledger {
        let Some(dims) = dimensions.get(&row.provider) else {
            let entry = not_imported.entry(row.provider.clone()).or_default();
            entry.0 += row.attempts;
            entry.1 += row.cost_pusd;
            entry.2 |= row.unknown_cost_attempts > 0;
            continue;
        };
        let key = key_of(
            &row.provider,
            row.cell_start,
            &row.billing_account,
            Some(&row.model),
            &row.service_tier,
            dims,
        );
        cells.entry(key).or_default().ledger.add(&ledger_side(row));
    }
    let mut other_costs: BTreeMap<(String, String, Option<String>, String), i128> = BTreeMap::new();
    for row in &rows.billed {
        let currency = row.currency.clone().unwrap_or_else(|| "USD".into());
        if row.kind == "other_cost" || (row.kind == "token_cost" && currency != "USD") {
            *other_costs
                .entry((row.provider.clone(), row.kind.clone(), row.detail.clone(), currency))
                .or_default() += row.amount_pico;
            continue;
        }
        let Some(dims) = dimensions.get(&row.provider) else { continue };
        let key = key_of(
            &row.provider,
            row.cell_start,
            &row.billing_account,
            row.model.as_ref(),
            &row.service_tier,
            dims,
        );
        let sides = cells.entry(key).or_default();
        add_billed(sides, row);
    }
    // Every cell of a covered time appears, so that a day the provider
    // billed nothing for is seen; the ledger's cells carry the attempts.
    let by_source: BTreeMap<&str, Vec<&StoredBucket>> =
        rows.buckets.iter().fold(BTreeMap::new(), |mut m, b| {
            m.entry(b.source.as_str()).or_default().push(b);
            m
        });
    let mut listed: Vec<Cell> = Vec::with_capacity(cells.len());
    for ((provider, start, account, model, tier), sides) in cells {
        let end = start + grain.length();
        let Some((cost_source, usage_source)) = sources_of(&provider) else { continue };
        let covers =
            |s: BillSource| cover(by_source.get(s.name()).map_or(&[][..], Vec::as_slice), start, end);
        let (cost_cover, usage_cover) = (covers(cost_source), covers(usage_source));
        let window_cut = start < scope.since || end > scope.until;
        let time = CellTime {
            end,
            partial: window_cut || cost_cover == Cover::Partial || usage_cover == Cover::Partial,
            uncovered: cost_cover == Cover::None && usage_cover == Cover::None,
            settled_before: options.settled_before,
        };
        let usage_known = usage_cover == Cover::Full;
        let billed = BilledSide {
            requests: if usage_known {
                sides.requests.or(Some(0)).filter(|_| usage_source != BillSource::AnthropicUsage)
            } else {
                None
            },
            tokens: usage_known.then_some(sides.tokens),
            cost_pusd: (cost_cover == Cover::Full).then_some(sides.cost),
            tokens_priced_pusd: (usage_known && !sides.unpriced_usage).then_some(sides.tokens_priced),
            billed_anything: sides.billed_anything,
        };
        let (drift, causes) = decompose(&sides.ledger, &billed);
        let cell_status = status(time, &sides.ledger, &billed, drift, options.tolerance);
        listed.push(Cell {
            start,
            end,
            provider,
            billing_account: account,
            model,
            service_tier: tier,
            status: cell_status.name(),
            ledger: LedgerJson {
                attempts: sides.ledger.attempts,
                billable_attempts: sides.ledger.billable_attempts,
                unbilled_failures: sides.ledger.unbilled_failures,
                tokens: sides.ledger.tokens.into(),
                cost_usd: usd(sides.ledger.cost()),
                unknown_cost_attempts: sides.ledger.unknown_cost_attempts,
                repriced_usd: usd(sides.ledger.repriced()),
            },
            billed: BilledJson {
                requests: billed.requests,
                tokens: billed.tokens.map(Tokens::from),
                cost_usd: usd(billed.cost_pusd),
                tokens_priced_usd: usd(billed.tokens_priced_pusd),
            },
            drift_usd: usd(drift),
            drift_pct: drift.zip(billed.cost_pusd).and_then(|(d, p)| pct(d, p)),
            causes: CausesJson {
                unbilled_failures: usd(causes.unbilled_failures),
                emitter_cost: usd(causes.emitter_cost),
                tokens: usd(causes.tokens),
                price: usd(causes.price),
                unexplained: usd(causes.unexplained),
            },
            hidden_requests: hidden_requests(&sides.ledger, &billed),
        });
    }
    let totals = totals(&listed);
    let mut largest: Vec<&Cell> = listed.iter().filter(|c| compared(c)).collect();
    largest.sort_by_key(|c| std::cmp::Reverse(c.drift_usd.map_or(0, |d| d.0.abs())));
    let largest = largest.into_iter().take(5).cloned().collect();
    let cells_total = listed.len() as u64;
    listed.truncate(MAX_LISTED_CELLS);
    Reconciliation {
        since: scope.since,
        until: scope.until,
        grain: grain.name(),
        dimensions,
        cells_listed: listed.len() as u64,
        cells: listed,
        cells_total,
        largest,
        totals,
        other_costs: other_costs
            .into_iter()
            .map(|((provider, kind, detail, currency), pico)| OtherCost {
                provider,
                kind,
                detail,
                currency,
                amount: Usd(pico),
            })
            .collect(),
        not_imported: not_imported
            .into_iter()
            .map(|(provider, (attempts, cost, unknown))| NotImported {
                provider,
                attempts,
                cost_usd: (!unknown).then_some(Usd(cost)),
            })
            .collect(),
    }
}

fn compared(cell: &Cell) -> bool {
    cell.status.parse::<Status>().is_ok_and(Status::is_settled_comparison)
}

fn pct(drift: i128, provider: i128) -> Option<f64> {
    (provider != 0).then(|| drift as f64 * 100.0 / provider as f64)
}

fn key_of(
    provider: &str,
    start: DateTime<Utc>,
    account: &Option<String>,
    model: Option<&String>,
    tier: &Option<String>,
    dims: &Dimensions,
) -> CellKey {
    (
        provider.to_string(),
        start,
        account.clone().filter(|_| dims.billing_account),
        model.cloned().filter(|_| dims.model),
        tier.clone().filter(|_| dims.service_tier),
    )
}

fn ledger_side(row: &LedgerRow) -> LedgerSide {
    LedgerSide {
        attempts: row.attempts,
        billable_attempts: row.billable_attempts,
        unbilled_failures: row.unbilled_failures,
        tokens: TokenSums {
            input: row.input_tokens,
            cached_input: row.cached_input_tokens,
            cache_write_input: row.cache_write_input_tokens,
            output: row.output_tokens,
        },
        cost_pusd: row.cost_pusd,
        unknown_cost_attempts: row.unknown_cost_attempts,
        unbilled_cost_pusd: row.unbilled_cost_pusd,
        repriced_pusd: row.repriced_pusd,
        unrepriced_attempts: row.unrepriced_attempts,
    }
}

fn add_billed(sides: &mut Sides, row: &BilledRow) {
    let Some((cost_source, usage_source)) = sources_of(&row.provider) else { return };
    let source = row.source.parse::<BillSource>().ok();
    if row.kind == "usage" && source == Some(usage_source) {
        if let Some(r) = row.requests {
            sides.requests = Some(sides.requests.unwrap_or(0) + r);
        }
        sides.tokens.add(&TokenSums {
            input: row.input_tokens,
            cached_input: row.cached_input_tokens,
            cache_write_input: row.cache_write_input_tokens,
            output: row.output_tokens,
        });
        sides.tokens_priced += row.tokens_priced_pusd;
        sides.unpriced_usage |= row.unpriced_facts > 0;
        sides.billed_anything |= row.input_tokens + row.output_tokens > 0 || row.requests.unwrap_or(0) > 0;
    } else if row.kind == "token_cost" && source == Some(cost_source) {
        sides.cost += row.amount_pico;
        sides.billed_anything |= row.amount_pico != 0;
    }
}

/// A dimension is used for a provider when every fact of its exports in
/// the window (usage and token costs) and every attempt billed to it
/// carry it.
fn dimensions_of(rows: &ReconcileRows, imported: &BTreeSet<String>) -> BTreeMap<String, Dimensions> {
    let mut dims: BTreeMap<String, Dimensions> = imported
        .iter()
        .map(|p| (p.clone(), Dimensions { billing_account: true, model: true, service_tier: true }))
        .collect();
    for row in rows.billed.iter().filter(|r| r.kind != "other_cost") {
        if let Some(d) = dims.get_mut(&row.provider) {
            d.billing_account &= row.billing_account.is_some();
            d.model &= row.model.is_some();
            d.service_tier &= row.service_tier.is_some();
        }
    }
    for row in &rows.ledger {
        if let Some(d) = dims.get_mut(&row.provider) {
            d.billing_account &= row.billing_account.is_some();
            d.service_tier &= row.service_tier.is_some();
        }
    }
    dims
}

fn totals(cells: &[Cell]) -> Totals {
    let mut by_status: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut all = Rollup::default();
    let mut by_day: BTreeMap<String, Rollup> = BTreeMap::new();
    let mut by_model: BTreeMap<String, Rollup> = BTreeMap::new();
    let mut by_provider: BTreeMap<String, Rollup> = BTreeMap::new();
    for cell in cells {
        *by_status.entry(cell.status).or_default() += 1;
        if !compared(cell) {
            continue;
        }
        let day = cell.start.format("%Y-%m-%d").to_string();
        let model = format!("{}/{}", cell.provider, cell.model.as_deref().unwrap_or("(all models)"));
        for (rollup, key) in [
            (&mut all, None),
            (by_day.entry(day.clone()).or_default(), Some(day)),
            (by_model.entry(model.clone()).or_default(), Some(model)),
            (by_provider.entry(cell.provider.clone()).or_default(), Some(cell.provider.clone())),
        ] {
            rollup.key = key;
            add_cell(rollup, cell);
        }
    }
    let finish = |mut r: Rollup| {
        r.drift_pct = pct(r.drift_usd.0, r.billed_cost_usd.0);
        r
    };
    Totals {
        all: finish(all),
        cells_by_status: by_status,
        by_day: by_day.into_values().map(finish).collect(),
        by_model: by_model.into_values().map(finish).collect(),
        by_provider: by_provider.into_values().map(finish).collect(),
    }
}

fn add_cell(r: &mut Rollup, cell: &Cell) {
    let v = |u: Option<Usd>| u.map_or(0, |u| u.0);
    r.cells += 1;
    // A cell without a drift (no cost on one side) adds no money, so the
    // roll-up's causes still sum to its drift.
    if cell.drift_usd.is_none() {
        return;
    }
    r.ledger_cost_usd.0 += v(cell.ledger.cost_usd);
    r.billed_cost_usd.0 += v(cell.billed.cost_usd);
    r.drift_usd.0 += v(cell.drift_usd);
    r.causes.unbilled_failures.0 += v(cell.causes.unbilled_failures);
    r.causes.emitter_cost.0 += v(cell.causes.emitter_cost);
    r.causes.tokens.0 += v(cell.causes.tokens);
    r.causes.price.0 += v(cell.causes.price);
    r.causes.unexplained.0 += v(cell.causes.unexplained);
}

/// The answer as a table (cells, then the window's totals), JSON or CSV
/// (one row per cell).
pub fn render(answer: &Reconciliation, format: super::Format) -> String {
    match format {
        super::Format::Json => {
            serde_json::to_string_pretty(answer).expect("an answer always serialises") + "\n"
        }
        super::Format::Csv => csv(answer),
        super::Format::Table => table(answer),
    }
}

fn shown(u: Option<Usd>) -> String {
    u.map_or_else(|| "-".to_string(), |u| format!("{:.6}", u.0 as f64 / 1e12))
}

fn table(answer: &Reconciliation) -> String {
    use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
    let mut out = format!(
        "Reconciliation {} to {} by {} (UTC)\n",
        answer.since.to_rfc3339(),
        answer.until.to_rfc3339(),
        answer.grain
    );
    for (provider, d) in &answer.dimensions {
        let used: Vec<&str> = [("account", d.billing_account), ("model", d.model), ("tier", d.service_tier)]
            .into_iter()
            .filter_map(|(name, on)| on.then_some(name))
            .collect();
        out += &format!(
            "  {provider}: cells by {}\n",
            if used.is_empty() { "time only".into() } else { used.join(", ") }
        );
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "start",
        "provider",
        "account",
        "model",
        "tier",
        "status",
        "attempts",
        "unbilled",
        "ledger $",
        "billed $",
        "drift $",
        "unbilled $",
        "emitter $",
        "tokens $",
        "price $",
        "unexplained $",
        "hidden req",
    ]);
    for c in &answer.cells {
        t.add_row([
            c.start.format("%Y-%m-%d %H:%M").to_string(),
            c.provider.clone(),
            c.billing_account.clone().unwrap_or_default(),
            c.model.clone().unwrap_or_default(),
            c.service_tier.clone().unwrap_or_default(),
            c.status.to_string(),
            c.ledger.attempts.to_string(),
            c.ledger.unbilled_failures.to_string(),
            shown(c.ledger.cost_usd),
            shown(c.billed.cost_usd),
            shown(c.drift_usd),
            shown(c.causes.unbilled_failures),
            shown(c.causes.emitter_cost),
            shown(c.causes.tokens),
            shown(c.causes.price),
            shown(c.causes.unexplained),
            c.hidden_requests.map_or_else(|| "-".into(), |h| h.to_string()),
        ]);
    }
    out += &format!("{t}\n");
    if answer.cells_listed < answer.cells_total {
        out += &format!(
            "({} of {} cells listed; the totals count all)\n",
            answer.cells_listed, answer.cells_total
        );
    }
    let all = &answer.totals.all;
    out += &format!(
        "Settled, compared cells: {}; ledger ${}, billed ${}, drift ${} = unbilled failures ${} + emitter cost ${} + tokens ${} + price ${} + unexplained ${}\n",
        all.cells,
        all.ledger_cost_usd,
        all.billed_cost_usd,
        all.drift_usd,
        all.causes.unbilled_failures,
        all.causes.emitter_cost,
        all.causes.tokens,
        all.causes.price,
        all.causes.unexplained
    );
    let statuses: Vec<String> =
        answer.totals.cells_by_status.iter().map(|(s, n)| format!("{s} {n}")).collect();
    out += &format!("Cells by status: {}\n", statuses.join(", "));
    for o in &answer.other_costs {
        out += &format!(
            "Not compared: {} {} {} {} {}\n",
            o.provider,
            o.kind,
            o.detail.as_deref().unwrap_or("-"),
            o.amount,
            o.currency
        );
    }
    for n in &answer.not_imported {
        out += &format!(
            "No export imported for {}: {} attempts, ${}\n",
            n.provider,
            n.attempts,
            n.cost_usd.map_or_else(|| "unknown".into(), |c| c.to_string())
        );
    }
    out
}

fn csv(answer: &Reconciliation) -> String {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    let text = |u: Option<Usd>| u.map(|u| u.to_string()).unwrap_or_default();
    let _ = w.write_record([
        "start",
        "end",
        "provider",
        "billing_account",
        "model",
        "service_tier",
        "status",
        "attempts",
        "billable_attempts",
        "unbilled_failures",
        "ledger_cost_usd",
        "repriced_usd",
        "billed_requests",
        "billed_cost_usd",
        "tokens_priced_usd",
        "drift_usd",
        "unbilled_failures_usd",
        "emitter_cost_usd",
        "tokens_usd",
        "price_usd",
        "unexplained_usd",
        "hidden_requests",
    ]);
    for c in &answer.cells {
        let _ = w.write_record([
            c.start.to_rfc3339(),
            c.end.to_rfc3339(),
            c.provider.clone(),
            c.billing_account.clone().unwrap_or_default(),
            c.model.clone().unwrap_or_default(),
            c.service_tier.clone().unwrap_or_default(),
            c.status.to_string(),
            c.ledger.attempts.to_string(),
            c.ledger.billable_attempts.to_string(),
            c.ledger.unbilled_failures.to_string(),
            text(c.ledger.cost_usd),
            text(c.ledger.repriced_usd),
            c.billed.requests.map(|r| r.to_string()).unwrap_or_default(),
            text(c.billed.cost_usd),
            text(c.billed.tokens_priced_usd),
            text(c.drift_usd),
            text(c.causes.unbilled_failures),
            text(c.causes.emitter_cost),
            text(c.causes.tokens),
            text(c.causes.price),
            text(c.causes.unexplained),
            c.hidden_requests.map(|r| r.to_string()).unwrap_or_default(),
        ]);
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

/// One provider's sums over one day's compared cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DaySums {
    pub start: DateTime<Utc>,
    pub ledger: i128,
    pub billed: i128,
}

/// Per provider, the last day with settled, compared cells that have a
/// drift, and its sums: what /metrics shows.
pub fn last_settled_days(answer: &Reconciliation) -> BTreeMap<String, DaySums> {
    let mut days: BTreeMap<(String, DateTime<Utc>), DaySums> = BTreeMap::new();
    for cell in answer.cells.iter().filter(|c| compared(c) && c.drift_usd.is_some()) {
        let day = cell.start.date_naive().and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
        let sums =
            days.entry((cell.provider.clone(), day)).or_insert(DaySums { start: day, ledger: 0, billed: 0 });
        sums.ledger += cell.ledger.cost_usd.map_or(0, |u| u.0);
        sums.billed += cell.billed.cost_usd.map_or(0, |u| u.0);
    }
    let mut last: BTreeMap<String, DaySums> = BTreeMap::new();
    for ((provider, _), sums) in days {
        last.insert(provider, sums);
    }
    last
}
