//! The price table (docs/prices.md): the shipped `prices/prices.toml` (a
//! conversion of LiteLLM's price map) with a user's file merged over it,
//! and the one rule that says what price list charged an attempt: the
//! entry of its served model in force on its day, the row of its service
//! tier and prompt size, the kinds of tokens it used, and the provider's
//! discount.
//!
//! Prices are integer pico-dollars per token (per request for web search),
//! so the store prices attempts with exact integer arithmetic.

mod file;
pub mod import;
pub mod names;
mod shipped;

use std::collections::BTreeMap;
use std::path::Path;

use chrono::NaiveDate;

/// The table shipped inside the binary.
pub const BUILTIN_PRICES: &str = include_str!("../../../../prices/prices.toml");
/// Entries the binary takes from providers' own price pages over the
/// converted table's (docs/prices.md, "Corrections").
pub const BUILTIN_CORRECTIONS: &str = include_str!("../../../../prices/corrections.toml");
const CORRECTIONS_PATH: &str = "<built-in corrections.toml>";

/// The tier of an attempt that states none, or states one of the names
/// providers give their standard tier.
pub const STANDARD_TIER: &str = "standard";
/// The tier of an attempt sent through a batch API, whatever its
/// `service_tier` says.
pub const BATCH_TIER: &str = "batch";

/// Prompt sizes (all input tokens of one request) the store keeps apart, so
/// a long-context price can start at any of them: a row's
/// `above_input_tokens` is one of these. 199,999 is xAI's: its higher price
/// starts *at* 200,000 tokens.
pub const PROMPT_EDGES: [i64; 10] =
    [32_000, 64_000, 100_000, 128_000, 199_999, 200_000, 256_000, 272_000, 512_000, 1_000_000];

/// The largest edge a prompt of `input_tokens` exceeds (0: none): the
/// store's `prompt_over` (queries/rules/rules.sql states the same rule).
pub fn prompt_over(input_tokens: i64) -> i64 {
    PROMPT_EDGES.iter().rev().find(|&&edge| input_tokens > edge).copied().unwrap_or(0)
}

/// The price tier of an attempt: `batch` when sent through a batch API,
/// else its service tier, lower-cased, with the spellings of the standard
/// tier (`default`, `auto`, `on_demand`, none) as `standard`
/// (queries/rules/rules.sql states the same rule).
pub fn price_tier(batch: Option<bool>, service_tier: Option<&str>) -> String {
    if batch == Some(true) {
        return BATCH_TIER.to_string();
    }
    normal_tier(&service_tier.unwrap_or_default().trim().to_ascii_lowercase()).to_string()
}

/// A lower-cased tier name with the standard tier's spellings as one.
fn normal_tier(tier: &str) -> &str {
    match tier {
        "" | "default" | "auto" | "standard" | "on_demand" => STANDARD_TIER,
        other => other,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    #[error("cannot read price file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("price file {path}: {source}")]
    Parse { path: String, source: Box<toml::de::Error> },
    #[error("price file {path}: {at}: `{field}` = {value} {why}")]
    BadPrice {
        path: String,
        /// `provider/model`.
        at: String,
        field: &'static str,
        value: String,
        why: String,
    },
    #[error("price file {path}: {at}: {why}")]
    Invalid { path: String, at: String, why: String },
}

/// Prices of each kind of token, pico-dollars per token (`web_search` per
/// request); `None` where the row states none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KindPrices {
    /// Input neither read from nor written to a cache.
    pub input: Option<i64>,
    pub cached_input: Option<i64>,
    /// Written to the five-minute cache.
    pub cache_write: Option<i64>,
    /// Written to the one-hour cache.
    pub cache_write_1h: Option<i64>,
    /// Output that is not reasoning.
    pub output: Option<i64>,
    /// Reasoning output; a row without one charges reasoning as output.
    pub reasoning_output: Option<i64>,
    pub web_search: Option<i64>,
}

/// What one attempt (or a group of attempts with the same price key and
/// kinds) used, by kind. `input` counts all input, cached and cache-written
/// included; `cache_write` all cache writes, one-hour ones included;
/// `output` all output, reasoning included (the record's meanings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input: i64,
    pub cached_input: i64,
    pub cache_write: i64,
    pub cache_write_1h: i64,
    pub output: i64,
    pub reasoning_output: i64,
    pub web_search_requests: i64,
}

impl KindPrices {
    /// Reasoning at its own price, else at the output price.
    fn with_reasoning(self) -> KindPrices {
        KindPrices { reasoning_output: self.reasoning_output.or(self.output), ..self }
    }

    /// The cost of `usage` in pico-dollars, or `None` when it used a kind
    /// this row has no price for (`no_kind_price`). The same formula as
    /// queries/cost.sql's `priced_pusd`.
    pub fn cost(&self, usage: &Usage) -> Option<i128> {
        let prices = self.with_reasoning();
        let terms = [
            (usage.input - usage.cached_input - usage.cache_write, prices.input),
            (usage.cached_input, prices.cached_input),
            (usage.cache_write - usage.cache_write_1h, prices.cache_write),
            (usage.cache_write_1h, prices.cache_write_1h),
            (usage.output - usage.reasoning_output, prices.output),
            (usage.reasoning_output, prices.reasoning_output),
            (usage.web_search_requests, prices.web_search),
        ];
        terms.iter().try_fold(0i128, |sum, &(count, price)| match (count, price) {
            (0, _) => Some(sum),
            (count, Some(price)) => Some(sum + i128::from(count) * i128::from(price)),
            (_, None) => None,
        })
    }

    fn discounted(self, ppm: i64) -> KindPrices {
        // Half a pico-dollar rounds up: prices are never negative.
        let apply = |price: Option<i64>| {
            price.map(|p| ((i128::from(p) * i128::from(ppm) + 500_000) / 1_000_000) as i64)
        };
        KindPrices {
            input: apply(self.input),
            cached_input: apply(self.cached_input),
            cache_write: apply(self.cache_write),
            cache_write_1h: apply(self.cache_write_1h),
            output: apply(self.output),
            reasoning_output: apply(self.reasoning_output),
            web_search: apply(self.web_search),
        }
    }
}

/// The kinds of a price, by the bit `priced_kinds` (queries/rules/rules.sql)
/// gives an attempt that used it.
pub const KIND_BITS: [(u8, &str); 7] = [
    (1, "input"),
    (2, "cached_input"),
    (4, "cache_write"),
    (8, "cache_write_1h"),
    (16, "output"),
    (32, "reasoning_output"),
    (64, "web_search"),
];

impl KindPrices {
    /// The kinds `used` (a `priced_kinds` value) names that these prices
    /// lack, by name.
    pub fn missing(&self, used: u8) -> Vec<&'static str> {
        let prices = self.with_reasoning();
        let by_bit = [
            prices.input,
            prices.cached_input,
            prices.cache_write,
            prices.cache_write_1h,
            prices.output,
            prices.reasoning_output,
            prices.web_search,
        ];
        KIND_BITS
            .iter()
            .zip(by_bit)
            .filter(|((bit, _), price)| used & bit != 0 && price.is_none())
            .map(|((_, name), _)| *name)
            .collect()
    }
}

/// One row of an entry: its tier, the prompt size it starts above, and its
/// prices, with where and when they were read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub since: Option<NaiveDate>,
    pub tier: String,
    /// 0 for the row of any prompt size; else one of `PROMPT_EDGES`.
    pub above: i64,
    pub prices: KindPrices,
    pub source: Option<String>,
    pub as_of: Option<NaiveDate>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Discount {
    account: Option<String>,
    since: Option<NaiveDate>,
    /// Parts per million of the list price.
    ppm: i64,
}

/// The order of an entry's rows: by since, the standard rows first, then
/// each tier's, by prompt size.
fn row_order(row: &Row) -> (Option<NaiveDate>, bool, &str, i64) {
    (row.since, row.tier != STANDARD_TIER, row.tier.as_str(), row.above)
}

/// Why an attempt that needs a price has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unpriced {
    /// No entry of its served model in force on its day.
    NoPrice,
    /// The entry has no row for its tier (or for its tier at its prompt size).
    NoTierPrice,
    /// The row has no price for a kind of token it used.
    NoKindPrice,
}

impl Unpriced {
    pub fn name(self) -> &'static str {
        match self {
            Unpriced::NoPrice => "no_price",
            Unpriced::NoTierPrice => "no_tier_price",
            Unpriced::NoKindPrice => "no_kind_price",
        }
    }
}

/// What an attempt is priced with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriceKey<'a> {
    pub provider: &'a str,
    pub model: &'a str,
    pub day: NaiveDate,
    /// `price_tier`'s answer.
    pub tier: &'a str,
    /// `prompt_over`'s answer.
    pub prompt_over: i64,
    pub billing_account: Option<&'a str>,
}

/// The row that prices a key, with the discount applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The name of the entry that matched.
    pub model: String,
    pub row: Row,
    /// The row's prices after the discount; reasoning filled from output.
    pub prices: KindPrices,
    /// The discount applied, parts per million (`None`: list price).
    pub discount_ppm: Option<i64>,
    /// Matched only once the served name's region was dropped.
    pub region_dropped: bool,
}

#[derive(Debug, Clone, Default)]
pub struct PriceTable {
    /// Whether the shipped table lies under the merged rows (read through
    /// `shipped::shipped()`, each provider parsed on first use).
    on_shipped: bool,
    /// Rows merged over the shipped ones by (provider, model), sorted by
    /// since, tier and size: they replace the shipped rows of their since.
    models: BTreeMap<(String, String), Vec<Row>>,
    discounts: BTreeMap<String, Vec<Discount>>,
}

impl PriceTable {
    /// The shipped table, with `overrides` (a user's file) merged over it.
    pub fn load(overrides: Option<&Path>) -> Result<Self, PriceError> {
        let mut table = Self::builtin();
        if let Some(path) = overrides {
            let text = crate::files::read_config(path)
                .map_err(|source| PriceError::Read { path: path.display().to_string(), source })?;
            table.merge(&text, &path.display().to_string())?;
        }
        Ok(table)
    }

    /// The shipped table alone: the converted map with the corrections
    /// merged over it.
    pub fn builtin() -> Self {
        let mut table = match shipped::shipped() {
            shipped::Shipped::Indexed(_) => Self { on_shipped: true, ..Self::default() },
            shipped::Shipped::Whole(table) => (**table).clone(),
        };
        table
            .merge(BUILTIN_CORRECTIONS, CORRECTIONS_PATH)
            .expect("the shipped corrections are valid (tested)");
        table
    }

    /// The corrections alone (prices/corrections.toml), parsed once per
    /// process.
    pub fn corrections() -> &'static PriceTable {
        static CORRECTIONS: std::sync::OnceLock<PriceTable> = std::sync::OnceLock::new();
        CORRECTIONS.get_or_init(|| {
            let mut table = PriceTable::default();
            table
                .merge(BUILTIN_CORRECTIONS, CORRECTIONS_PATH)
                .expect("the shipped corrections are valid (tested)");
            table
        })
    }

    /// Merges a price file over the table: the rows it gives for a (provider,
    /// model, since) replace every row the table had for them (an entry is
    /// replaced whole, its tiers and sizes included); a discount replaces one
    /// of the same provider, account and since.
    pub fn merge(&mut self, text: &str, path: &str) -> Result<(), PriceError> {
        self.merge_checked(file::check(text, path)?, path)
    }

    fn merge_checked(&mut self, checked: file::CheckedFile, path: &str) -> Result<(), PriceError> {
        let mut replaced: std::collections::BTreeSet<(String, String, Option<NaiveDate>)> =
            Default::default();
        for (provider, model, row) in checked.rows {
            let rows = self.models.entry((provider.clone(), model.clone())).or_default();
            if replaced.insert((provider.clone(), model.clone(), row.since)) {
                rows.retain(|r| r.since != row.since);
            } else if rows.iter().any(|r| r.since == row.since && r.tier == row.tier && r.above == row.above)
            {
                return Err(PriceError::Invalid {
                    path: path.into(),
                    at: format!("{provider}/{model}"),
                    why: format!(
                        "two rows for tier `{}` above {} tokens{}",
                        row.tier,
                        row.above,
                        row.since.map(|d| format!(" since {d}")).unwrap_or_default()
                    ),
                });
            }
            rows.push(row);
        }
        for (provider, model, _) in &replaced {
            if let Some(rows) = self.models.get_mut(&(provider.clone(), model.clone())) {
                rows.sort_by(|a, b| row_order(a).cmp(&row_order(b)));
            }
        }
        for (provider, discount) in checked.discounts {
            let list = self.discounts.entry(provider).or_default();
            list.retain(|d| (&d.account, d.since) != (&discount.account, discount.since));
            list.push(discount);
        }
        Ok(())
    }

    /// The rows of a (provider, model) entry name, every `since` included:
    /// the shipped ones a merged file did not replace, then the merged ones.
    fn rows(&self, provider: &str, model: &str) -> Vec<&Row> {
        let merged = self.models.get(&(provider.to_string(), model.to_string()));
        let shipped = self.shipped_providers().and_then(|providers| providers.get(provider)?.rows(model));
        let mut rows: Vec<&Row> = shipped
            .into_iter()
            .flatten()
            .filter(|r| merged.is_none_or(|merged| merged.iter().all(|m| m.since != r.since)))
            .chain(merged.into_iter().flatten())
            .collect();
        rows.sort_by(|a, b| row_order(a).cmp(&row_order(b)));
        rows
    }

    fn shipped_providers(&self) -> Option<&'static BTreeMap<String, shipped::Provider>> {
        match shipped::shipped() {
            shipped::Shipped::Indexed(providers) if self.on_shipped => Some(providers),
            _ => None,
        }
    }

    /// Every entry name of the table, sorted by provider and model.
    pub fn entry_names(&self) -> impl Iterator<Item = (&str, &str)> {
        let shipped =
            self.shipped_providers().into_iter().flatten().flat_map(|(name, provider)| {
                provider.models.keys().map(move |model| (name.as_str(), *model))
            });
        let merged = self.models.keys().map(|(p, m)| (p.as_str(), m.as_str()));
        shipped.chain(merged).collect::<std::collections::BTreeSet<_>>().into_iter()
    }

    /// The rows of the entry that prices `model` of `provider` on `day`:
    /// the most specific name with an entry in force, its rows of the latest
    /// `since` at or before `day`, and whether the name dropped a region.
    pub fn entry_at(&self, provider: &str, model: &str, day: NaiveDate) -> Option<(String, Vec<&Row>, bool)> {
        let provider = provider.to_ascii_lowercase();
        for candidate in names::candidates(model) {
            let rows = self.rows(&provider, &candidate.name);
            let in_force =
                rows.iter().filter(|r| r.since.is_none_or(|since| since <= day)).map(|r| r.since).max();
            let Some(since) = in_force else { continue };
            let entry: Vec<&Row> = rows.into_iter().filter(|r| r.since == since).collect();
            return Some((candidate.name, entry, candidate.region_dropped));
        }
        None
    }

    /// The row that prices `key` (docs/prices.md, "Which entry prices an
    /// attempt"), or why none does. Kinds are checked against usage apart
    /// (`KindPrices::cost`).
    pub fn resolve(&self, key: &PriceKey<'_>) -> Result<Resolved, Unpriced> {
        let (model, entry, region_dropped) =
            self.entry_at(key.provider, key.model, key.day).ok_or(Unpriced::NoPrice)?;
        // The prompt size a row must start at: the largest the entry knows,
        // in any tier, that this prompt exceeds. A tier without it is
        // unpriced for long prompts, never priced as short ones.
        let needed =
            entry.iter().map(|r| r.above).filter(|&above| above <= key.prompt_over).max().unwrap_or(0);
        let row = entry
            .iter()
            .find(|r| r.tier == key.tier && r.above == needed)
            .copied()
            .ok_or(Unpriced::NoTierPrice)?
            .clone();
        let discount_ppm = self.discount_ppm(key.provider, key.billing_account, key.day);
        let list = row.prices.with_reasoning();
        let prices = discount_ppm.map_or(list, |ppm| list.discounted(ppm));
        Ok(Resolved { model, row, prices, discount_ppm, region_dropped })
    }

    /// The discount of an account (its own, else the provider's) in force on
    /// `day`.
    fn discount_ppm(&self, provider: &str, account: Option<&str>, day: NaiveDate) -> Option<i64> {
        let list = self.discounts.get(&provider.to_ascii_lowercase())?;
        let latest = |for_account: Option<&str>| {
            list.iter()
                .filter(|d| d.account.as_deref() == for_account && d.since.is_none_or(|since| since <= day))
                .max_by_key(|d| d.since)
                .map(|d| d.ppm)
        };
        account.and_then(|account| latest(Some(account))).or_else(|| latest(None))
    }

    /// The cost of `usage` under `key`, or why it is unknown.
    pub fn cost(&self, key: &PriceKey<'_>, usage: &Usage) -> Result<i128, Unpriced> {
        self.resolve(key)?.prices.cost(usage).ok_or(Unpriced::NoKindPrice)
    }

    /// The name a reconciliation cell gives a model: without the release
    /// date or version a provider appends (`gpt-4o-mini-2024-07-18` is
    /// `gpt-4o-mini`), so a bill that names the snapshot and telemetry that
    /// names the alias meet in one cell. Each side is still priced by its own
    /// name.
    pub fn cell_model(&self, _provider: &str, model: &str) -> String {
        names::undated(model).to_string()
    }
}

#[cfg(test)]
mod tests;
