//! `prices check` and `prices show` (docs/prices.md, "Keeping prices
//! current"): what the stored attempts needed of the price table and it
//! lacked, and what one model's entry says.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use comfy_table::{Cell, CellAlignment, ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;

use crate::store::PriceNeed;
use attempt_core::pricing::{KindPrices, PriceKey, PriceTable, Row, Unpriced};

/// An entry older than this (its `as_of`) is stale: providers change prices
/// more often.
pub const STALE_AFTER_DAYS: i64 = 90;

/// What the table lacked for the attempts, and which of its entries are old.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PriceCheck {
    /// Attempts of unknown cost for want of a price, by served model, tier,
    /// prompt size, reason and the kinds without a price; most attempts
    /// (then tokens) first.
    pub unpriced: Vec<Gap>,
    /// Attempts priced by an entry found only once their served model's
    /// region was dropped: a regional premium may be missing.
    pub region_dropped: Vec<Gap>,
    /// Entries that priced attempts and were read more than 90 days before
    /// the check.
    pub stale: Vec<Stale>,
    pub attempts_checked: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Gap {
    pub served_provider: String,
    pub served_model: String,
    pub tier: String,
    /// The prompt size the attempts exceeded (0: none).
    pub prompt_over: i64,
    /// no_price | no_tier_price | no_kind_price | region_dropped
    pub reason: &'static str,
    /// For no_kind_price: the kinds used without a price.
    pub kinds: Vec<&'static str>,
    pub attempts: i64,
    pub tokens: i128,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stale {
    pub provider: String,
    /// The entry's model name.
    pub model: String,
    pub as_of: NaiveDate,
    pub age_days: i64,
    pub attempts: i64,
}

impl PriceCheck {
    /// Whether anything needs a price (exit status 5).
    pub fn has_gaps(&self) -> bool {
        !self.unpriced.is_empty()
    }
}

/// Checks `needs` against `table` on `today`.
pub fn check(needs: &[PriceNeed], table: &PriceTable, today: NaiveDate) -> PriceCheck {
    type GapKey = (String, String, String, i64, &'static str, Vec<&'static str>);
    let mut gaps: BTreeMap<GapKey, (i64, i128)> = BTreeMap::new();
    let mut stale: BTreeMap<(String, String, NaiveDate), i64> = BTreeMap::new();
    let mut checked = 0;
    for need in needs {
        checked += need.attempts;
        let key = PriceKey {
            provider: &need.served_provider,
            model: &need.served_model,
            day: need.day,
            tier: &need.tier,
            prompt_over: need.prompt_over,
            billing_account: need.billing_account.as_deref(),
        };
        let (reason, kinds) = match table.resolve(&key) {
            Err(why) => (why.name(), Vec::new()),
            Ok(resolved) => {
                if let Some(as_of) = resolved.row.as_of.filter(|d| (today - *d).num_days() > STALE_AFTER_DAYS)
                {
                    *stale
                        .entry((need.served_provider.clone(), resolved.model.clone(), as_of))
                        .or_default() += need.attempts;
                }
                let missing = resolved.prices.missing(need.kinds);
                match (missing.is_empty(), resolved.region_dropped) {
                    (false, _) => (Unpriced::NoKindPrice.name(), missing),
                    (true, true) => ("region_dropped", Vec::new()),
                    (true, false) => continue,
                }
            }
        };
        let key = (
            need.served_provider.clone(),
            need.served_model.clone(),
            need.tier.clone(),
            need.prompt_over,
            reason,
            kinds,
        );
        let sums = gaps.entry(key).or_default();
        sums.0 += need.attempts;
        sums.1 += need.tokens;
    }
    let (mut region_dropped, mut unpriced): (Vec<Gap>, Vec<Gap>) =
        gaps.into_iter()
            .map(|((served_provider, served_model, tier, prompt_over, reason, kinds), (attempts, tokens))| {
                Gap { served_provider, served_model, tier, prompt_over, reason, kinds, attempts, tokens }
            })
            .partition(|g| g.reason == "region_dropped");
    // What costs the most unknown dollars first: most attempts, then most
    // tokens; ties by name so the list is the same run to run.
    for gaps in [&mut unpriced, &mut region_dropped] {
        gaps.sort_by(|a, b| b.attempts.cmp(&a.attempts).then(b.tokens.cmp(&a.tokens)).then(a.cmp(b)));
    }
    let stale = stale
        .into_iter()
        .map(|((provider, model, as_of), attempts)| Stale {
            provider,
            model,
            as_of,
            age_days: (today - as_of).num_days(),
            attempts,
        })
        .collect();
    PriceCheck { unpriced, region_dropped, stale, attempts_checked: checked }
}

pub fn check_table(check: &PriceCheck) -> String {
    let mut out = format!("{} attempts priced from their tokens checked\n", check.attempts_checked);
    let gap_table = |title: &str, gaps: &[Gap]| {
        let mut t =
            styled(&["served by", "model", "tier", "prompt over", "reason", "kinds", "attempts", "tokens"]);
        for g in gaps {
            t.add_row(vec![
                Cell::new(&g.served_provider),
                Cell::new(&g.served_model),
                Cell::new(&g.tier),
                Cell::new(g.prompt_over).set_alignment(CellAlignment::Right),
                Cell::new(g.reason),
                Cell::new(g.kinds.join(", ")),
                Cell::new(g.attempts).set_alignment(CellAlignment::Right),
                Cell::new(g.tokens).set_alignment(CellAlignment::Right),
            ]);
        }
        format!("{title}\n{t}\n")
    };
    if check.unpriced.is_empty() {
        out += "Nothing unpriced: every attempt's served model, tier, prompt size and kinds have a price.\n";
    } else {
        out +=
            &gap_table("Unpriced (unknown cost until the table has these; docs/prices.md):", &check.unpriced);
    }
    if !check.region_dropped.is_empty() {
        out += &gap_table(
            "Priced without their region (the table has no entry for the regional name: a premium may be missing):",
            &check.region_dropped,
        );
    }
    if !check.stale.is_empty() {
        let mut t = styled(&["provider", "entry", "as of", "days old", "attempts"]);
        for s in &check.stale {
            t.add_row(vec![
                Cell::new(&s.provider),
                Cell::new(&s.model),
                Cell::new(s.as_of),
                Cell::new(s.age_days).set_alignment(CellAlignment::Right),
                Cell::new(s.attempts).set_alignment(CellAlignment::Right),
            ]);
        }
        out += &format!(
            "Entries read more than {STALE_AFTER_DAYS} days ago (regenerate: docs/prices.md):\n{t}\n"
        );
    }
    out
}

/// One model's entry as `prices show` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shown {
    pub provider: String,
    /// The model asked about, and the entry name that prices it.
    pub model: String,
    pub entry: String,
    pub at: NaiveDate,
    pub region_dropped: bool,
    pub since: Option<NaiveDate>,
    pub as_of: Option<NaiveDate>,
    pub source: Option<String>,
    pub rows: Vec<ShownRow>,
}

/// A row's prices in USD per million tokens (`web_search` per request).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShownRow {
    pub tier: String,
    pub above_input_tokens: i64,
    pub input: Option<f64>,
    pub cached_input: Option<f64>,
    pub cache_write: Option<f64>,
    pub cache_write_1h: Option<f64>,
    pub output: Option<f64>,
    pub reasoning_output: Option<f64>,
    pub web_search: Option<f64>,
}

/// The entry that prices `model` of `provider` on `at`, `None` without one.
pub fn show(table: &PriceTable, provider: &str, model: &str, at: NaiveDate) -> Option<Shown> {
    let (entry, rows, region_dropped) = table.entry_at(provider, model, at)?;
    let first: &Row = rows.first()?;
    let per_million = |pico: Option<i64>| pico.map(|p| p as f64 / 1e6);
    let shown_rows = rows
        .iter()
        .map(|r| {
            let p: KindPrices = r.prices;
            ShownRow {
                tier: r.tier.clone(),
                above_input_tokens: r.above,
                input: per_million(p.input),
                cached_input: per_million(p.cached_input),
                cache_write: per_million(p.cache_write),
                cache_write_1h: per_million(p.cache_write_1h),
                output: per_million(p.output),
                reasoning_output: per_million(p.reasoning_output),
                web_search: p.web_search.map(|p| p as f64 / 1e12),
            }
        })
        .collect();
    Some(Shown {
        provider: provider.to_ascii_lowercase(),
        model: model.to_string(),
        entry,
        at,
        region_dropped,
        since: first.since,
        as_of: first.as_of,
        source: first.source.clone(),
        rows: shown_rows,
    })
}

pub fn show_table(shown: &Shown) -> String {
    let mut out = format!(
        "{}/{} on {}: entry `{}`{}, since {}, as of {}{}\n",
        shown.provider,
        shown.model,
        shown.at,
        shown.entry,
        if shown.region_dropped { " (its region dropped: no regional entry)" } else { "" },
        shown.since.map_or("always".to_string(), |d| d.to_string()),
        shown.as_of.map_or("unknown".to_string(), |d| d.to_string()),
        shown.source.as_deref().map(|s| format!(", from {s}")).unwrap_or_default(),
    );
    let mut t = styled(&[
        "tier",
        "prompt over",
        "input",
        "cached",
        "cache write",
        "1h write",
        "output",
        "reasoning",
        "web search",
    ]);
    let usd = |v: Option<f64>| {
        Cell::new(v.map_or("-".to_string(), |v| format!("{v}"))).set_alignment(CellAlignment::Right)
    };
    for r in &shown.rows {
        t.add_row(vec![
            Cell::new(&r.tier),
            Cell::new(r.above_input_tokens).set_alignment(CellAlignment::Right),
            usd(r.input),
            usd(r.cached_input),
            usd(r.cache_write),
            usd(r.cache_write_1h),
            usd(r.output),
            usd(r.reasoning_output),
            usd(r.web_search),
        ]);
    }
    out += &format!("USD per million tokens (web search per request); - : no price\n{t}\n");
    out
}

fn styled(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.to_vec());
    t
}
