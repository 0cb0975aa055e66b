//! The price table (docs/record-format.md, "Waste, cost, amplification"): load the shipped `prices/prices.toml`,
//! merge a user's file over it, and match a served model to an entry.
//!
//! Prices are held as integer pico-dollars per token so the store can price
//! attempts with exact integer arithmetic.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

/// The table shipped inside the binary.
pub const BUILTIN_PRICES: &str = include_str!("../../../prices/prices.toml");

#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    #[error("cannot read price file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("price file {path}: {source}")]
    Parse { path: String, source: Box<toml::de::Error> },
    #[error("price file {path}: {provider}/{model}: `{field}` must be a finite price >= 0, got {value}")]
    BadPrice { path: String, provider: String, model: String, field: &'static str, value: f64 },
}

/// The file format, documented in `prices/prices.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceFile {
    provider: Vec<ProviderPrices>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderPrices {
    /// Provider name as attempts spell it (`openai`, `aws.bedrock`, ...).
    name: String,
    /// Where the prices were read.
    #[allow(dead_code)]
    source: Option<String>,
    /// The day they were read from `source`.
    #[allow(dead_code)]
    as_of: Option<String>,
    models: Vec<ModelPrice>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelPrice {
    model: String,
    /// USD per 1M input tokens (all input, less the cached part).
    input: f64,
    /// USD per 1M cached input tokens; the `input` price when absent.
    cached_input: Option<f64>,
    /// USD per 1M input tokens written into a prompt cache; the `input`
    /// price when absent.
    cache_write: Option<f64>,
    /// USD per 1M output tokens.
    output: f64,
}

/// Per-token prices of one model, in pico-dollars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Price {
    pub input: i64,
    pub cached_input: i64,
    pub cache_write_input: i64,
    pub output: i64,
}

/// A served (provider, model) and the price entry it matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPrice {
    pub provider: String,
    pub model: String,
    pub price: Price,
}

#[derive(Debug, Clone, Default)]
pub struct PriceTable {
    entries: BTreeMap<(String, String), Price>,
}

impl PriceTable {
    /// The shipped table, with `overrides` (a user's file) merged over it.
    pub fn load(overrides: Option<&Path>) -> Result<Self, PriceError> {
        let mut table = Self::default();
        table.merge(BUILTIN_PRICES, "<built-in prices.toml>")?;
        if let Some(path) = overrides {
            let text = crate::files::read_config(path)
                .map_err(|source| PriceError::Read { path: path.display().to_string(), source })?;
            table.merge(&text, &path.display().to_string())?;
        }
        Ok(table)
    }

    pub fn merge(&mut self, text: &str, path: &str) -> Result<(), PriceError> {
        let file: PriceFile = toml::from_str(text)
            .map_err(|source| PriceError::Parse { path: path.into(), source: Box::new(source) })?;
        for provider in file.provider {
            let provider_name = provider.name.to_ascii_lowercase();
            for m in provider.models {
                let per_token = |field: &'static str, usd_per_million: f64| {
                    if usd_per_million.is_finite() && usd_per_million >= 0.0 {
                        // USD per 1e6 tokens -> pico-USD (1e-12) per token.
                        Ok((usd_per_million * 1e6).round() as i64)
                    } else {
                        Err(PriceError::BadPrice {
                            path: path.into(),
                            provider: provider_name.clone(),
                            model: m.model.clone(),
                            field,
                            value: usd_per_million,
                        })
                    }
                };
                let price = Price {
                    input: per_token("input", m.input)?,
                    cached_input: per_token("cached_input", m.cached_input.unwrap_or(m.input))?,
                    cache_write_input: per_token("cache_write", m.cache_write.unwrap_or(m.input))?,
                    output: per_token("output", m.output)?,
                };
                self.entries.insert((provider_name.clone(), m.model.clone()), price);
            }
        }
        Ok(())
    }

    /// The entry for a served model: exact, else the undated base name.
    pub fn lookup(&self, provider: &str, model: &str) -> Option<Price> {
        let provider = provider.to_ascii_lowercase();
        let exact = self.entries.get(&(provider.clone(), model.to_string()));
        exact.or_else(|| self.entries.get(&(provider, undated(model)?.to_string()))).copied()
    }

    /// The name a reconciliation cell gives a model, as the table names it
    /// (a dated name served by its base entry is the base), with its
    /// price; a name without an entry is its undated self and unpriced.
    pub fn cell_model(&self, provider: &str, model: &str) -> (String, Option<Price>) {
        let provider = provider.to_ascii_lowercase();
        if let Some(price) = self.entries.get(&(provider.clone(), model.to_string())) {
            return (model.to_string(), Some(*price));
        }
        let base = undated(model).unwrap_or(model);
        (base.to_string(), self.entries.get(&(provider, base.to_string())).copied())
    }

    /// Prices every (provider, model) pair that has an entry; pairs without
    /// one are left out and so have unknown cost.
    pub fn resolve<'a>(&self, served: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<ResolvedPrice> {
        served
            .into_iter()
            .filter_map(|(provider, model)| {
                let price = self.lookup(provider, model)?;
                Some(ResolvedPrice { provider: provider.into(), model: model.into(), price })
            })
            .collect()
    }
}

/// Strips what providers append to a model name to pin a release: a
/// Bedrock version (`-v1:0`), a Bedrock region prefix (`us.`), then a date
/// (`-2024-07-18`, `-20250929`, `@20250929`). `None` when nothing was
/// stripped.
fn undated(model: &str) -> Option<&str> {
    let mut name = model;
    for region in ["us.", "eu.", "apac.", "global."] {
        name = name.strip_prefix(region).unwrap_or(name);
    }
    if let Some((base, version)) = name.rsplit_once("-v")
        && version.split(':').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    {
        name = base;
    }
    let name = strip_date(name).unwrap_or(name);
    (name != model).then_some(name)
}

/// `-YYYY-MM-DD`, `-YYYYMMDD` or `@YYYYMMDD` at the end of a name.
fn strip_date(name: &str) -> Option<&str> {
    let bytes = name.as_bytes();
    let all_digits = |b: &[u8]| b.iter().all(u8::is_ascii_digit);
    // Each cut lands on an ASCII separator, so it is a char boundary.
    if let Some(cut) = name.len().checked_sub(11) {
        let d = &bytes[cut..];
        if d[0] == b'-'
            && d[5] == b'-'
            && d[8] == b'-'
            && all_digits(&d[1..5])
            && all_digits(&d[6..8])
            && all_digits(&d[9..])
        {
            return Some(&name[..cut]);
        }
    }
    let cut = name.len().checked_sub(9)?;
    let d = &bytes[cut..];
    ((d[0] == b'-' || d[0] == b'@') && all_digits(&d[1..])).then(|| &name[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_name_models_as_the_table_does() {
        let table = PriceTable::load(None).unwrap();
        let (name, price) = table.cell_model("openai", "gpt-4o-mini-2024-07-18");
        assert_eq!((name.as_str(), price), ("gpt-4o-mini", table.lookup("openai", "gpt-4o-mini")));
        assert_eq!(table.cell_model("OpenAI", "gpt-4o-mini").0, "gpt-4o-mini");
        // Unpriced: compared by its undated name, never priced at 0.
        assert_eq!(table.cell_model("openai", "my-model-20250101"), ("my-model".to_string(), None));
        assert_eq!(table.cell_model("openrouter", "openai/gpt-4o-mini").1, None);
    }

    #[test]
    fn shipped_table_loads_and_prices_per_token() {
        let table = PriceTable::load(None).unwrap();
        let p = table.lookup("openai", "gpt-4o-mini").unwrap();
        // $0.15 / $0.075 / $0.60 per million tokens.
        assert_eq!(
            p,
            Price { input: 150_000, cached_input: 75_000, cache_write_input: 150_000, output: 600_000 }
        );
        let sonnet = table.lookup("anthropic", "claude-sonnet-4-5").unwrap();
        assert_eq!(sonnet.cache_write_input, 3_750_000, "1.25x input for the 5-minute cache");
    }

    #[test]
    fn dated_and_versioned_names_match_their_base_entry() {
        let table = PriceTable::load(None).unwrap();
        for (provider, model, base) in [
            ("openai", "gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
            ("anthropic", "claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
            ("gcp.vertex_ai", "claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
            ("aws.bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic.claude-sonnet-4-5"),
        ] {
            assert_eq!(table.lookup(provider, model), table.lookup(provider, base), "{model}");
            assert!(table.lookup(provider, model).is_some(), "{model}");
        }
    }

    #[test]
    fn a_dated_entry_wins_over_its_base_entry() {
        let mut table = PriceTable::load(None).unwrap();
        table
            .merge(
                r#"[[provider]]
                   name = "openai"
                   models = [{ model = "gpt-4o-2024-05-13", input = 5.0, output = 15.0 }]"#,
                "dated.toml",
            )
            .unwrap();
        assert_eq!(table.lookup("openai", "gpt-4o-2024-05-13").unwrap().input, 5_000_000);
        assert_eq!(
            table.lookup("openai", "gpt-4o-2024-08-06").unwrap().input,
            2_500_000,
            "base serves others"
        );
    }

    #[test]
    fn unknown_models_and_other_providers_have_no_price() {
        let table = PriceTable::load(None).unwrap();
        assert_eq!(table.lookup("openai", "gpt-4o-mini-preview"), None);
        assert_eq!(table.lookup("openrouter", "gpt-4o"), None);
        assert_eq!(table.lookup("openai", "my-finetune"), None);
    }

    #[test]
    fn user_file_overrides_and_extends() {
        let mut table = PriceTable::load(None).unwrap();
        table
            .merge(
                r#"[[provider]]
                   name = "openai"
                   models = [{ model = "gpt-4o", input = 1.0, output = 2.0 },
                             { model = "my-finetune", input = 3.0, output = 4.0 }]"#,
                "user.toml",
            )
            .unwrap();
        assert_eq!(
            table.lookup("openai", "gpt-4o"),
            Some(Price {
                input: 1_000_000,
                cached_input: 1_000_000,
                cache_write_input: 1_000_000,
                output: 2_000_000
            })
        );
        assert!(table.lookup("openai", "my-finetune").is_some());
    }

    #[test]
    fn bad_price_files_are_explained() {
        let mut table = PriceTable::default();
        let err = table
            .merge(
                r#"[[provider]]
                      name = "x"
                      models = [{ model = "m", input = -1.0, output = 1.0 }]"#,
                "p.toml",
            )
            .unwrap_err();
        assert_eq!(err.to_string(), "price file p.toml: x/m: `input` must be a finite price >= 0, got -1");
        let err = table.merge("[[provider]]\nname = 1", "p.toml").unwrap_err();
        assert!(err.to_string().starts_with("price file p.toml:"), "{err}");
    }
}
