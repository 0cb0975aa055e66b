//! OpenRouter's activity (`{"data": [{"date", "model", "model_permaslug",
//! "endpoint_id", "provider_name", "usage", "byok_usage_inference",
//! "requests", "prompt_tokens", "completion_tokens", ...}]}`): per UTC day
//! and endpoint, dollars as JSON numbers. A day without activity is not
//! listed, so only the days listed are covered.

use chrono::{Days, NaiveDate, TimeZone, Utc};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::money::{Unit, pico_units};
use super::{BillFact, Bucket, FactKind, Money, PageBuckets, count};
use crate::model::Tokens;

#[derive(Deserialize)]
pub(super) struct Page {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    date: String,
    model: String,
    provider_name: Option<String>,
    usage: Box<RawValue>,
    byok_usage_inference: Option<Box<RawValue>>,
    requests: i64,
    prompt_tokens: i64,
    completion_tokens: i64,
}

pub(super) fn activity_page(page: Page) -> Result<PageBuckets, String> {
    let mut by_day: Vec<(Bucket, Vec<BillFact>)> = Vec::new();
    for (i, item) in page.data.into_iter().enumerate() {
        let at = |what: String| format!("data[{i}]: {what}");
        let day = NaiveDate::parse_from_str(&item.date, "%Y-%m-%d")
            .map_err(|e| at(format!("`date`: `{}` is not YYYY-MM-DD ({e})", item.date)))?;
        let start = Utc.from_utc_datetime(&day.and_hms_opt(0, 0, 0).unwrap_or_default());
        let end = start.checked_add_days(Days::new(1)).ok_or_else(|| at("`date` is out of range".into()))?;
        let bucket = Bucket { start, end };
        let dollars = |raw: &RawValue, field: &str| {
            pico_units(raw.get(), Unit::Major).map_err(|e| at(format!("`{field}`: {e}")))
        };
        let usd = |pico| Some(Money { currency: "USD".into(), pico });
        let base = BillFact {
            bucket,
            kind: FactKind::Usage,
            billing_account: None,
            api_key_id: None,
            model: Some(item.model.clone()),
            service_tier: None,
            detail: item.provider_name.clone(),
            requests: count(Some(item.requests), "requests").map_err(at)?,
            tokens: Tokens {
                input: count(Some(item.prompt_tokens), "prompt_tokens").map_err(at)?,
                output: count(Some(item.completion_tokens), "completion_tokens").map_err(at)?,
                cached_input: None,
                cache_write_input: None,
                reasoning_output: None,
                cache_write_1h_input: None,
            },
            web_search_requests: None,
            prompt_over: None,
            amount: None,
        };
        let mut facts = vec![
            base.clone(),
            BillFact {
                kind: FactKind::TokenCost,
                requests: None,
                tokens: Tokens::default(),
                web_search_requests: None,
                prompt_over: None,
                amount: usd(dollars(&item.usage, "usage")?),
                ..base.clone()
            },
        ];
        // Inference on the user's own provider key: the provider bills it,
        // not OpenRouter; kept apart.
        if let Some(byok) = &item.byok_usage_inference {
            let pico = dollars(byok, "byok_usage_inference")?;
            if pico != 0 {
                facts.push(BillFact {
                    kind: FactKind::OtherCost,
                    model: None,
                    requests: None,
                    tokens: Tokens::default(),
                    detail: Some("byok_usage_inference".into()),
                    web_search_requests: None,
                    prompt_over: None,
                    amount: usd(pico),
                    ..base
                });
            }
        }
        match by_day.iter_mut().find(|(b, _)| *b == bucket) {
            Some((_, list)) => list.extend(facts),
            None => by_day.push((bucket, facts)),
        }
    }
    Ok(by_day)
}
