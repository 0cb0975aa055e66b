//! OpenRouter's `/api/v1/models` answer into price rows of provider
//! `openrouter`, one per model slug: `pricing.prompt`, `completion`,
//! `input_cache_read`, `input_cache_write`, `internal_reasoning` (when not
//! 0: OpenRouter bills reasoning as output otherwise) and `web_search`, all
//! USD per token (per search) as decimal strings. A model with a
//! per-request fee or a variable price (`-1`, the router models) cannot be
//! stated and is left out, counted.

use serde_json::value::RawValue;

use super::{ImportError, ImportOptions, Imported, fields, pico_of_usd, row, text};
use crate::pricing::{KindPrices, STANDARD_TIER};

const SOURCE: &str = "OpenRouter models answer";
const PROVIDER: &str = "openrouter";

pub fn from_openrouter(json: &str, options: &ImportOptions) -> Result<Imported, ImportError> {
    #[derive(serde::Deserialize)]
    struct Answer<'a> {
        #[serde(borrow)]
        data: Option<Vec<&'a RawValue>>,
    }
    let answer: Answer<'_> =
        serde_json::from_str(json).map_err(|error| ImportError::Json { source_name: SOURCE, error })?;
    let models = answer.data.ok_or_else(|| ImportError::Shape {
        source_name: SOURCE,
        why: "no `data` array of models (is this the /api/v1/models answer?)".into(),
    })?;
    let mut imported = Imported::default();
    for model in models {
        imported.notes.read += 1;
        let model = fields(model).unwrap_or_default();
        let (Some(id), Some(pricing)) =
            (model.get("id").and_then(|id| text(id)), model.get("pricing").and_then(|p| fields(p)))
        else {
            imported.notes.skip("a model without `id` or `pricing`");
            continue;
        };
        let is_variable = pricing.values().any(|v| text(v).is_some_and(|s| s.trim().starts_with('-')));
        if is_variable {
            imported.notes.skip("a variable price (`-1`: a router, priced by what it routes to)");
            continue;
        }
        let mut price = |key: &str| pricing.get(key).and_then(|v| pico_of_usd(v, &mut imported.notes));
        let fee = price("request");
        let nonzero = |p: Option<i64>| p.filter(|&pico| pico > 0);
        let prices = KindPrices {
            input: price("prompt"),
            cached_input: price("input_cache_read"),
            cache_write: price("input_cache_write"),
            cache_write_1h: None,
            output: price("completion"),
            reasoning_output: nonzero(price("internal_reasoning")),
            web_search: nonzero(price("web_search")),
        };
        if fee.is_some_and(|fee| fee > 0) {
            imported.notes.skip("a per-request fee (the file has no such price)");
            continue;
        }
        if prices.input.is_none() || prices.output.is_none() {
            imported.notes.skip("no prompt or completion price");
            continue;
        }
        for key in ["image", "audio", "input_audio_cache"] {
            if pricing.get(key).and_then(|v| pico_of_usd(v, &mut imported.notes)).is_some_and(|p| p > 0) {
                *imported.notes.unstated.entry(key.to_string()).or_default() += 1;
            }
        }
        imported.add(
            PROVIDER.into(),
            id.clone(),
            vec![row(STANDARD_TIER, 0, prices, options.as_of)],
            &id,
            true,
        );
    }
    Ok(imported)
}
