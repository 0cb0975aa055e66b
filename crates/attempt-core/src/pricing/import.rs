//! `prices import`: other catalogs' price lists converted into the price
//! file (docs/prices.md, "Keeping prices current"): LiteLLM's
//! `model_prices_and_context_window.json` and OpenRouter's `/api/v1/models`
//! answer. Every price is read as the decimal written; what a catalog
//! states that the price file cannot (images, audio, per-request fees,
//! off-peak hours, ...) is counted in the notes, never guessed.

mod litellm;
mod openrouter;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::NaiveDate;
use rust_decimal::{Decimal, RoundingStrategy};
use serde_json::value::RawValue;

use super::{KindPrices, Row, STANDARD_TIER};

pub use litellm::from_litellm;
pub use openrouter::from_openrouter;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{source_name}: not JSON: {error}")]
    Json { source_name: &'static str, error: serde_json::Error },
    #[error("{source_name}: {why}")]
    Shape { source_name: &'static str, why: String },
}

/// What the converted file says about where its prices come from.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The `source` of every provider block.
    pub source: String,
    /// The `as_of` of every provider block: the day the catalog was read.
    pub as_of: NaiveDate,
    /// Keep providers the alias table does not name, under their catalog
    /// spelling (LiteLLM only: OpenRouter's are all `openrouter`).
    pub all_providers: bool,
}

/// A converted catalog: rows by canonical provider and model, and what was
/// left out and why.
#[derive(Debug, Default)]
pub struct Imported {
    pub models: BTreeMap<(String, String), Vec<Row>>,
    pub notes: Notes,
    /// The models whose rows came from the name the catalog looks up first.
    preferred: std::collections::BTreeSet<(String, String)>,
}

/// What a conversion read and could not state, each counted.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Notes {
    /// Catalog entries read.
    pub read: usize,
    /// Entries converted into the file.
    pub converted: usize,
    /// Left out by kind: a mode that is not chat, completion, responses or
    /// embedding; a provider the alias table does not name; a threshold the
    /// store does not keep apart; ...
    pub skipped: BTreeMap<String, usize>,
    /// Price keys of converted entries the file cannot state, with the
    /// entries that had them (images, audio, off-peak hours, ...).
    pub unstated: BTreeMap<String, usize>,
    /// Prices that were not a whole number of pico-dollars per token as
    /// written (a binary float's last digit) and were rounded.
    pub rounded: usize,
    /// Two catalog names of one (provider, model) with different prices:
    /// which was kept.
    pub conflicts: Vec<String>,
}

impl Notes {
    fn skip(&mut self, why: impl Into<String>) {
        *self.skipped.entry(why.into()).or_default() += 1;
    }

    /// The notes as lines for a person.
    pub fn summary(&self) -> String {
        let mut text = format!("{} entries read, {} converted\n", self.read, self.converted);
        for (why, n) in &self.skipped {
            let _ = writeln!(text, "  skipped {n}: {why}");
        }
        for (key, n) in &self.unstated {
            let _ = writeln!(text, "  not stated (the file has no such price) in {n} entries: {key}");
        }
        if self.rounded > 0 {
            let _ = writeln!(text, "  {} prices rounded to a whole pico-dollar per token", self.rounded);
        }
        for conflict in &self.conflicts {
            let _ = writeln!(text, "  {conflict}");
        }
        text
    }
}

impl Imported {
    /// Adds an entry's rows. Of two catalog names of one model, the one the
    /// catalog's own lookup finds first (`preferred`: LiteLLM reads
    /// `provider/model` before `model`) is kept, else the first; a
    /// disagreement is noted.
    fn add(&mut self, provider: String, model: String, rows: Vec<Row>, catalog_name: &str, preferred: bool) {
        let key = (provider, model);
        match self.models.get(&key) {
            None => {
                self.models.insert(key.clone(), rows);
                if preferred {
                    self.preferred.insert(key);
                }
                self.notes.converted += 1;
            }
            Some(existing) if *existing == rows => {
                if preferred {
                    self.preferred.insert(key);
                }
            }
            Some(_) => {
                let (provider, model) = &key;
                if preferred && !self.preferred.contains(&key) {
                    self.notes.conflicts.push(format!(
                        "{provider}/{model}: catalog names disagree; kept `{catalog_name}`, the name looked up first"
                    ));
                    self.models.insert(key.clone(), rows);
                    self.preferred.insert(key);
                } else {
                    self.notes.conflicts.push(format!(
                        "{provider}/{model}: catalog names disagree; `{catalog_name}` left out"
                    ));
                }
            }
        }
    }

    /// The converted rows as a price file (docs/prices.md): providers and
    /// models sorted, one row a line, each price the exact decimal.
    pub fn to_toml(&self, options: &ImportOptions, header: &str) -> String {
        let mut text = String::new();
        for line in header.lines() {
            let _ = writeln!(text, "# {line}");
        }
        let mut current: Option<&str> = None;
        for ((provider, model), rows) in &self.models {
            if current != Some(provider.as_str()) {
                if current.is_some() {
                    text.push_str("]\n");
                }
                let _ = write!(
                    text,
                    "\n[[provider]]\nname = {}\nsource = {}\nas_of = \"{}\"\nmodels = [\n",
                    quoted(provider),
                    quoted(&options.source),
                    options.as_of
                );
                current = Some(provider.as_str());
            }
            for row in rows {
                let _ = writeln!(text, "  {},", row_toml(model, row));
            }
        }
        if current.is_some() {
            text.push_str("]\n");
        }
        text
    }
}

fn quoted(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

fn row_toml(model: &str, row: &Row) -> String {
    let mut fields = vec![format!("model = {}", quoted(model))];
    if let Some(since) = row.since {
        fields.push(format!("since = \"{since}\""));
    }
    if row.tier != STANDARD_TIER {
        fields.push(format!("tier = {}", quoted(&row.tier)));
    }
    if row.above > 0 {
        fields.push(format!("above_input_tokens = {}", row.above));
    }
    let p = &row.prices;
    for (name, price) in [
        ("input", p.input),
        ("cached_input", p.cached_input),
        ("cache_write", p.cache_write),
        ("cache_write_1h", p.cache_write_1h),
        ("output", p.output),
        ("reasoning_output", p.reasoning_output),
    ] {
        if let Some(pico) = price {
            fields.push(format!("{name} = {}", decimal(pico, 6)));
        }
    }
    if let Some(pico) = p.web_search {
        fields.push(format!("web_search = {}", decimal(pico, 12)));
    }
    format!("{{ {} }}", fields.join(", "))
}

/// `units / 10^scale` written exactly, always with a decimal point.
fn decimal(units: i64, scale: u32) -> String {
    let divisor = 10i64.pow(scale);
    let fraction = format!("{:0width$}", units % divisor, width = scale as usize);
    let fraction = fraction.trim_end_matches('0');
    format!("{}.{}", units / divisor, if fraction.is_empty() { "0" } else { fraction })
}

/// A price in USD (per token or per request; a JSON number or string) as
/// pico-dollars, read from the text the catalog wrote (never through a
/// binary float), rounded to the nearest whole pico-dollar and counted
/// when that moved it. `None` for what is not a price >= 0.
fn pico_of_usd(value: &RawValue, notes: &mut Notes) -> Option<i64> {
    let raw = value.get().trim();
    let written =
        if raw.starts_with('"') { serde_json::from_str::<String>(raw).ok()? } else { raw.to_string() };
    let written = written.trim();
    let usd = if written.contains(['e', 'E']) {
        Decimal::from_scientific(written).ok()?
    } else {
        written.parse::<Decimal>().ok()?
    };
    if usd.is_sign_negative() && !usd.is_zero() {
        return None;
    }
    let pico = usd.checked_mul(Decimal::from(1_000_000_000_000i64))?;
    let whole = pico.round_dp_with_strategy(0, RoundingStrategy::MidpointAwayFromZero);
    if whole != pico {
        notes.rounded += 1;
    }
    i64::try_from(whole).ok()
}

/// The fields of a JSON object, each as the text written; `None` for
/// anything else.
fn fields(value: &RawValue) -> Option<BTreeMap<String, &RawValue>> {
    serde_json::from_str(value.get()).ok()
}

/// A JSON string's value; `None` for anything else.
fn text(value: &RawValue) -> Option<String> {
    serde_json::from_str(value.get()).ok()
}

/// A row of the standard tier, of any prompt size, unless given.
fn row(tier: &str, above: i64, prices: KindPrices, as_of: NaiveDate) -> Row {
    Row { since: None, tier: tier.to_string(), above, prices, source: None, as_of: Some(as_of) }
}

#[cfg(test)]
mod tests;
