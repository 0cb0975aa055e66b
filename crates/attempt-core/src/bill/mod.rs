//! The provider's side of the bill (docs/reconcile.md): the usage and cost
//! exports of OpenAI's, Anthropic's and OpenRouter's admin APIs, read as the
//! APIs page them, into facts per time bucket. Reading is all or nothing: a
//! page that is not what its source says refuses the whole input, so an
//! import never stores half of one.

mod anthropic;
pub mod money;
mod openai;
mod openrouter;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use strum::{EnumString, IntoStaticStr, VariantNames};

use crate::model::Tokens;

/// The most bytes one input of pages may hold: a month of minute buckets
/// grouped by model, key and project is a few MiB.
pub const MAX_INPUT_BYTES: usize = 256 << 20;

/// An export a provider's admin API answers with.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, EnumString, IntoStaticStr, VariantNames,
)]
#[strum(serialize_all = "kebab-case")]
pub enum BillSource {
    /// `GET /v1/organization/usage/completions`.
    OpenaiUsage,
    /// `GET /v1/organization/costs`.
    OpenaiCosts,
    /// `GET /v1/organizations/usage_report/messages`.
    AnthropicUsage,
    /// `GET /v1/organizations/cost_report`.
    AnthropicCost,
    /// `GET /api/v1/activity`.
    OpenrouterActivity,
}

impl BillSource {
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The provider whose bill this is, by its canonical name.
    pub fn provider(self) -> &'static str {
        match self {
            Self::OpenaiUsage | Self::OpenaiCosts => "openai",
            Self::AnthropicUsage | Self::AnthropicCost => "anthropic",
            Self::OpenrouterActivity => "openrouter",
        }
    }

    /// `--source`'s values, for an error that lists them.
    pub fn names() -> String {
        Self::VARIANTS.join(", ")
    }
}

/// A provider's time bucket, `[start, end)` in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bucket {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// What a fact counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum FactKind {
    /// Requests and tokens.
    Usage,
    /// Money charged for tokens.
    TokenCost,
    /// Money charged for anything else (web search, code execution): shown
    /// apart, never compared with attempts.
    OtherCost,
}

/// An amount in pico-units (10^-12) of its currency (upper-case ISO 4217).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Money {
    pub currency: String,
    pub pico: i128,
}

/// One result line of one bucket, with the group keys the export carried
/// (`None`: the export was not grouped by it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BillFact {
    pub bucket: Bucket,
    pub kind: FactKind,
    /// OpenAI's project, Anthropic's workspace.
    pub billing_account: Option<String>,
    pub api_key_id: Option<String>,
    pub model: Option<String>,
    pub service_tier: Option<String>,
    /// What the line is: OpenAI's line item, Anthropic's cost and token type.
    pub detail: Option<String>,
    pub requests: Option<i64>,
    pub tokens: Tokens,
    /// Server-side web searches the usage line counts.
    pub web_search_requests: Option<i64>,
    /// The prompt size the line's context window starts above (Anthropic's
    /// `context_window`: `200k-1M` is 200,000; `0-200k` is 0): what selects
    /// a long-context price.
    pub prompt_over: Option<i64>,
    pub amount: Option<Money>,
}

/// An input of pages read: every bucket it covers (empty ones too: they
/// say the provider billed nothing then) and the facts in them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BillPages {
    pub source: BillSource,
    pub pages: usize,
    pub buckets: Vec<Bucket>,
    pub facts: Vec<BillFact>,
}

/// Reads `text` (one page, pages one after another, or one page per line)
/// as pages of `source`. The error names the page and the field.
pub fn read_pages(source: BillSource, text: &str) -> Result<BillPages, String> {
    if text.len() > MAX_INPUT_BYTES {
        return Err(format!(
            "{} bytes, more than the {MAX_INPUT_BYTES} an input of pages may hold",
            text.len()
        ));
    }
    let pages = match source {
        BillSource::OpenaiUsage => each_page(text, openai::usage_page)?,
        BillSource::OpenaiCosts => each_page(text, openai::costs_page)?,
        BillSource::AnthropicUsage => each_page(text, anthropic::usage_page)?,
        BillSource::AnthropicCost => each_page(text, anthropic::cost_page)?,
        BillSource::OpenrouterActivity => each_page(text, openrouter::activity_page)?,
    };
    if pages.is_empty() {
        return Err(format!("no page: an empty input is not a {} export", source.name()));
    }
    let count = pages.len();
    let (buckets, facts) = merge_pages(pages)?;
    Ok(BillPages { source, pages: count, buckets, facts })
}

/// The buckets of one page with their facts.
type PageBuckets = Vec<(Bucket, Vec<BillFact>)>;

fn each_page<P: DeserializeOwned>(
    text: &str,
    read: impl Fn(P) -> Result<PageBuckets, String>,
) -> Result<Vec<PageBuckets>, String> {
    let mut pages = Vec::new();
    for (at, page) in serde_json::Deserializer::from_str(text).into_iter::<P>().enumerate() {
        let page = page.map_err(|e| format!("page {}: {e}", at + 1))?;
        pages.push(read(page).map_err(|e| format!("page {}: {e}", at + 1))?);
    }
    Ok(pages)
}

/// The pages' buckets in order. A bucket repeated with the same results (a
/// page fetched twice) is one; repeated with other results, or overlapping
/// another, the input contradicts itself and is refused.
fn merge_pages(pages: Vec<PageBuckets>) -> Result<(Vec<Bucket>, Vec<BillFact>), String> {
    let mut seen: BTreeMap<Bucket, (usize, Vec<BillFact>)> = BTreeMap::new();
    for (at, page) in pages.into_iter().enumerate() {
        for (bucket, facts) in page {
            if bucket.end <= bucket.start {
                return Err(format!("page {}: bucket {} ends before it starts", at + 1, shown(&bucket)));
            }
            match seen.get(&bucket) {
                Some((first, earlier)) if *earlier != facts => {
                    return Err(format!(
                        "page {}: bucket {} appears again with other results than on page {}",
                        at + 1,
                        shown(&bucket),
                        first + 1
                    ));
                }
                Some(_) => {}
                None => {
                    seen.insert(bucket, (at, facts));
                }
            }
        }
    }
    let buckets: Vec<Bucket> = seen.keys().copied().collect();
    for pair in buckets.windows(2) {
        if pair[1].start < pair[0].end {
            return Err(format!("bucket {} overlaps bucket {}", shown(&pair[1]), shown(&pair[0])));
        }
    }
    let facts = seen.into_values().flat_map(|(_, facts)| facts).collect();
    Ok((buckets, facts))
}

fn shown(bucket: &Bucket) -> String {
    format!("{} to {}", bucket.start.to_rfc3339(), bucket.end.to_rfc3339())
}

/// A token count as an export writes it: an integer >= 0.
fn count(value: Option<i64>, field: &str) -> Result<Option<i64>, String> {
    match value {
        Some(n) if n < 0 => Err(format!("`{field}` is {n}, not a count")),
        other => Ok(other),
    }
}

/// The sum of the counts that are present; `None` when none is.
fn sum_present(parts: &[Option<i64>], what: &str) -> Result<Option<i64>, String> {
    let mut total: Option<i64> = None;
    for n in parts.iter().flatten() {
        total = Some(total.unwrap_or(0).checked_add(*n).ok_or_else(|| format!("{what} overflows 64 bits"))?);
    }
    Ok(total)
}

fn currency(code: &str) -> Result<String, String> {
    let code = code.trim();
    if code.len() == 3 && code.bytes().all(|b| b.is_ascii_alphabetic()) {
        Ok(code.to_ascii_uppercase())
    } else {
        Err(format!("`{code}` is not a currency code"))
    }
}

#[cfg(test)]
mod tests;
