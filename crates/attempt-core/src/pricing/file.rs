//! The price file as users write it (docs/prices.md, "The price file"),
//! read strictly: every field is checked and an error names the file, the
//! provider, the model and the field. Prices are read as the decimals
//! written, never through arithmetic on binary floats, so `0.1` is exactly
//! 100,000 pico-dollars per token.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::Deserialize;

use super::{Discount, KindPrices, PROMPT_EDGES, PriceError, Row, STANDARD_TIER};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PriceFile {
    #[serde(default)]
    pub provider: Vec<ProviderPrices>,
    #[serde(default)]
    pub discount: Vec<DiscountEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProviderPrices {
    /// The canonical provider name attempts are stored under.
    pub name: String,
    /// Where the prices were read; each row may name its own.
    pub source: Option<String>,
    /// The day they were read from `source`; each row may give its own.
    pub as_of: Option<DateText>,
    #[serde(default)]
    pub models: Vec<RowEntry>,
}

/// One row: a model's prices from `since`, for one service tier and one
/// prompt size. USD per 1,000,000 tokens; `web_search` in USD per request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RowEntry {
    pub model: String,
    pub since: Option<DateText>,
    pub tier: Option<String>,
    pub above_input_tokens: Option<i64>,
    pub input: Option<f64>,
    pub cached_input: Option<f64>,
    pub cache_write: Option<f64>,
    pub cache_write_1h: Option<f64>,
    pub output: Option<f64>,
    pub reasoning_output: Option<f64>,
    pub web_search: Option<f64>,
    pub source: Option<String>,
    pub as_of: Option<DateText>,
}

/// A negotiated rate: list cost times `multiplier`, for the provider's
/// attempts (or one billing account's) from `since`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DiscountEntry {
    pub provider: String,
    pub billing_account: Option<String>,
    pub since: Option<DateText>,
    pub multiplier: f64,
}

/// A day, written as a string (`"2026-01-01"`) or a TOML date (`2026-01-01`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum DateText {
    Text(String),
    Toml(toml::value::Datetime),
}

impl DateText {
    fn day(&self) -> Option<NaiveDate> {
        let text = match self {
            DateText::Text(text) => text.trim().to_string(),
            DateText::Toml(date) => match (date.date, date.time) {
                (Some(date), None) => date.to_string(),
                _ => return None,
            },
        };
        NaiveDate::parse_from_str(&text, "%Y-%m-%d").ok()
    }

    fn text(&self) -> String {
        match self {
            DateText::Text(text) => text.clone(),
            DateText::Toml(date) => date.to_string(),
        }
    }
}

/// What a checked file holds: rows by (provider, model), and discounts.
pub(super) struct CheckedFile {
    pub rows: Vec<(String, String, Row)>,
    pub discounts: Vec<(String, Discount)>,
}

pub(super) fn check(text: &str, path: &str) -> Result<CheckedFile, PriceError> {
    let file: PriceFile = toml::from_str(text)
        .map_err(|source| PriceError::Parse { path: path.into(), source: Box::new(source) })?;
    check_file(file, path)
}

fn check_file(file: PriceFile, path: &str) -> Result<CheckedFile, PriceError> {
    let mut rows = Vec::new();
    for provider in file.provider {
        let provider_name = provider.name.trim().to_ascii_lowercase();
        if provider_name.is_empty() {
            return Err(PriceError::Invalid {
                path: path.into(),
                at: "a [[provider]]".into(),
                why: "`name` must not be empty".into(),
            });
        }
        let block_as_of = match &provider.as_of {
            Some(date) => Some(day(date, path, &provider_name, "", "as_of")?),
            None => None,
        };
        for entry in provider.models {
            let at = |field: &str| format!("{provider_name}/{}: `{field}`", entry.model);
            if entry.model.trim().is_empty() || entry.model.trim() != entry.model {
                return Err(PriceError::Invalid {
                    path: path.into(),
                    at: format!("{provider_name}/{:?}", entry.model),
                    why: "`model` must be a name without surrounding spaces".into(),
                });
            }
            let since = match &entry.since {
                Some(date) => Some(day(date, path, &provider_name, &entry.model, "since")?),
                None => None,
            };
            let as_of = match &entry.as_of {
                Some(date) => Some(day(date, path, &provider_name, &entry.model, "as_of")?),
                None => block_as_of,
            };
            let tier = match entry.tier.as_deref().map(|t| t.trim().to_ascii_lowercase()) {
                None => STANDARD_TIER.to_string(),
                Some(t) if t.is_empty() => {
                    return Err(PriceError::Invalid {
                        path: path.into(),
                        at: at("tier"),
                        why: "must not be empty".into(),
                    });
                }
                Some(t) => super::normal_tier(&t).to_string(),
            };
            let above = match entry.above_input_tokens {
                None => 0,
                Some(n) if PROMPT_EDGES.contains(&n) => n,
                Some(n) => {
                    return Err(PriceError::Invalid {
                        path: path.into(),
                        at: at("above_input_tokens"),
                        why: format!(
                            "{n} is not a prompt size the store keeps apart; use one of {}",
                            PROMPT_EDGES.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
                        ),
                    });
                }
            };
            let per_token = |field: &'static str, value: Option<f64>| -> Result<Option<i64>, PriceError> {
                value
                    .map(|usd| pico(usd, PER_MILLION_TOKENS, path, &provider_name, &entry.model, field))
                    .transpose()
            };
            let prices = KindPrices {
                input: per_token("input", entry.input)?,
                cached_input: per_token("cached_input", entry.cached_input)?,
                cache_write: per_token("cache_write", entry.cache_write)?,
                cache_write_1h: per_token("cache_write_1h", entry.cache_write_1h)?,
                output: per_token("output", entry.output)?,
                reasoning_output: per_token("reasoning_output", entry.reasoning_output)?,
                web_search: entry
                    .web_search
                    .map(|usd| pico(usd, PER_REQUEST, path, &provider_name, &entry.model, "web_search"))
                    .transpose()?,
            };
            if prices == KindPrices::default() {
                return Err(PriceError::Invalid {
                    path: path.into(),
                    at: format!("{provider_name}/{}", entry.model),
                    why: "a row must give at least one price".into(),
                });
            }
            let source = entry.source.or_else(|| provider.source.clone());
            rows.push((
                provider_name.clone(),
                entry.model,
                Row { since, tier, above, prices, source, as_of },
            ));
        }
    }
    let mut discounts = Vec::new();
    for entry in file.discount {
        let provider_name = entry.provider.trim().to_ascii_lowercase();
        let at = format!("[[discount]] of {provider_name}");
        if provider_name.is_empty() {
            return Err(PriceError::Invalid {
                path: path.into(),
                at: "a [[discount]]".into(),
                why: "`provider` must not be empty".into(),
            });
        }
        let since = match &entry.since {
            Some(date) => Some(day(date, path, &provider_name, "", "since")?),
            None => None,
        };
        let ppm = multiplier_ppm(entry.multiplier).map_err(|why| PriceError::Invalid {
            path: path.into(),
            at: format!("{at}: `multiplier`"),
            why,
        })?;
        discounts.push((provider_name, Discount { account: entry.billing_account, since, ppm }));
    }
    Ok(CheckedFile { rows, discounts })
}

/// Pico-dollars per USD of a per-token price written per million tokens.
const PER_MILLION_TOKENS: i64 = 1_000_000;
/// Pico-dollars per USD of a per-request price.
const PER_REQUEST: i64 = 1_000_000_000_000;

/// `usd` (as written: the shortest decimal that reads back as the same
/// float) times `pico_per_usd`, refused unless it is a whole number of
/// pico-dollars, finite and not negative.
fn pico(
    usd: f64,
    pico_per_usd: i64,
    path: &str,
    provider: &str,
    model: &str,
    field: &'static str,
) -> Result<i64, PriceError> {
    let bad = |why: String| PriceError::BadPrice {
        path: path.into(),
        at: format!("{provider}/{model}"),
        field,
        value: usd.to_string(),
        why,
    };
    if !usd.is_finite() || usd < 0.0 {
        return Err(bad("must be a finite price >= 0".into()));
    }
    let written: Decimal = usd.to_string().parse().map_err(|_| bad("is not a decimal".into()))?;
    let scaled =
        written.checked_mul(Decimal::from(pico_per_usd)).ok_or_else(|| bad("is too large".into()))?;
    if scaled.fract() != Decimal::ZERO {
        let unit = if pico_per_usd == PER_REQUEST {
            "request"
        } else {
            "token (at most 6 decimals of USD per million tokens)"
        };
        return Err(bad(format!("is finer than a pico-dollar per {unit}")));
    }
    i64::try_from(scaled.trunc()).map_err(|_| bad("is too large".into()))
}

/// A discount multiplier in parts per million: at most 6 decimals, from 0
/// to 10 (a surcharge above 1 is a multiplier too).
fn multiplier_ppm(multiplier: f64) -> Result<i64, String> {
    if !multiplier.is_finite() || !(0.0..=10.0).contains(&multiplier) {
        return Err(format!("{multiplier} must be a number from 0 to 10"));
    }
    let written: Decimal =
        multiplier.to_string().parse().map_err(|_| format!("{multiplier} is not a decimal"))?;
    let ppm = written * Decimal::from(1_000_000);
    if ppm.fract() != Decimal::ZERO {
        return Err(format!("{multiplier} has more than 6 decimals"));
    }
    i64::try_from(ppm.trunc()).map_err(|_| format!("{multiplier} is too large"))
}

fn day(
    date: &DateText,
    path: &str,
    provider: &str,
    model: &str,
    field: &'static str,
) -> Result<NaiveDate, PriceError> {
    date.day().ok_or_else(|| PriceError::Invalid {
        path: path.into(),
        at: if model.is_empty() {
            format!("{provider}: `{field}`")
        } else {
            format!("{provider}/{model}: `{field}`")
        },
        why: format!("{:?} is not a day written YYYY-MM-DD", date.text()),
    })
}
