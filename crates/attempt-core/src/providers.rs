//! Provider names: one canonical name per provider (docs/record-format.md,
//! "Provider names"). The shipped `prices/providers.toml` maps the spellings
//! emitters send (`Azure OpenAI`, `azure`, `bedrock`, `vertex_ai`, ...) to
//! the OpenTelemetry GenAI well-known values; a user's file extends it.
//!
//! Matching is on the trimmed, lower-cased spelling; a spelling in no entry
//! is its own canonical name (lower-cased), as before aliases existed.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

pub const BUILTIN_PROVIDERS: &str = include_str!("../../../prices/providers.toml");

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("cannot read provider alias file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("provider alias file {path}: {source}")]
    Parse { path: String, source: Box<toml::de::Error> },
    #[error("provider alias file {path}: `{alias}` is an alias of both `{first}` and `{second}`")]
    Ambiguous { path: String, alias: String, first: String, second: String },
    #[error("provider alias file {path}: a provider name must not be empty")]
    EmptyName { path: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AliasFile {
    provider: Vec<AliasEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AliasEntry {
    name: String,
    #[serde(default)]
    aliases: Vec<String>,
}

/// Received spelling (normalised) to canonical name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderAliases {
    canonical: HashMap<String, String>,
}

impl ProviderAliases {
    /// The shipped table with `overrides` (a user's file) merged over it.
    pub fn load(overrides: Option<&Path>) -> Result<Self, ProviderError> {
        let mut table = Self::builtin();
        if let Some(path) = overrides {
            let text = crate::files::read_config(path)
                .map_err(|source| ProviderError::Read { path: path.display().to_string(), source })?;
            // A user may move an alias to another provider: their file wins.
            table.merge(&text, &path.display().to_string(), true)?;
        }
        Ok(table)
    }

    /// The shipped table alone.
    pub fn builtin() -> Self {
        let mut table = Self::default();
        table
            .merge(BUILTIN_PROVIDERS, "<built-in providers.toml>", false)
            .expect("the shipped provider alias table is valid (tested)");
        table
    }

    fn merge(&mut self, text: &str, path: &str, override_existing: bool) -> Result<(), ProviderError> {
        let file: AliasFile = toml::from_str(text)
            .map_err(|source| ProviderError::Parse { path: path.into(), source: Box::new(source) })?;
        let mut this_file: HashMap<String, String> = HashMap::new();
        for entry in file.provider {
            let name = normalise(&entry.name);
            if name.is_empty() {
                return Err(ProviderError::EmptyName { path: path.into() });
            }
            for alias in std::iter::once(entry.name.as_str()).chain(entry.aliases.iter().map(String::as_str))
            {
                let alias = normalise(alias);
                if let Some(first) = this_file.get(&alias).filter(|first| **first != name) {
                    return Err(ProviderError::Ambiguous {
                        path: path.into(),
                        alias,
                        first: first.clone(),
                        second: name,
                    });
                }
                this_file.insert(alias, name.clone());
            }
        }
        for (alias, name) in this_file {
            if override_existing || !self.canonical.contains_key(&alias) {
                self.canonical.insert(alias, name);
            }
        }
        Ok(())
    }

    /// The canonical name for a received spelling.
    pub fn canonical(&self, received: &str) -> String {
        let key = normalise(received);
        self.canonical.get(&key).cloned().unwrap_or(key)
    }

    /// Whether the table names this spelling (as an alias or a canonical
    /// name), rather than keeping an unknown spelling as itself.
    pub fn knows(&self, received: &str) -> bool {
        self.canonical.contains_key(&normalise(received))
    }

    /// Every (alias, canonical) pair whose alias differs from its canonical
    /// name, sorted: what `rebuild` re-applies to stored rows.
    pub fn pairs(&self) -> Vec<(&str, &str)> {
        let mut pairs: Vec<(&str, &str)> = self
            .canonical
            .iter()
            .filter(|(alias, name)| alias != name)
            .map(|(alias, name)| (alias.as_str(), name.as_str()))
            .collect();
        pairs.sort_unstable();
        pairs
    }
}

/// How spellings are compared (and how the derived `attempt_id` hashes a
/// provider): trimmed and lower-cased.
pub fn normalise(spelling: &str) -> String {
    spelling.trim().to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_azure_openai_is_one_provider() {
        let table = ProviderAliases::builtin();
        for spelling in ["azure", "az.ai.openai", "azure.ai.openai", "Azure OpenAI", " AZURE "] {
            assert_eq!(table.canonical(spelling), "azure.ai.openai", "{spelling}");
        }
        assert_eq!(table.canonical("Amazon Bedrock"), "aws.bedrock");
        assert_eq!(table.canonical("vertex_ai"), "gcp.vertex_ai");
        assert_eq!(table.canonical("Some-New-Lab"), "some-new-lab", "unknown spellings are kept");
    }

    #[test]
    fn canonical_names_match_the_price_table() {
        let table = ProviderAliases::builtin();
        for text in [crate::pricing::BUILTIN_PRICES, crate::pricing::BUILTIN_CORRECTIONS] {
            let prices: toml::Value = toml::from_str(text).unwrap();
            for entry in prices["provider"].as_array().unwrap() {
                let name = entry["name"].as_str().unwrap();
                assert_eq!(table.canonical(name), name, "price entry `{name}` is not a canonical name");
            }
        }
    }

    #[test]
    fn a_user_file_adds_and_moves_aliases() {
        let mut table = ProviderAliases::builtin();
        let user = r#"
            [[provider]]
            name = "openai"
            aliases = ["corp-proxy-openai", "chatgpt"]
            [[provider]]
            name = "x_ai"
            aliases = ["grok"]
        "#;
        table.merge(user, "user.toml", true).unwrap();
        assert_eq!(table.canonical("Corp-Proxy-OpenAI"), "openai");
        assert_eq!(table.canonical("grok"), "x_ai");
    }

    #[test]
    fn an_alias_of_two_providers_in_one_file_is_an_error() {
        let text = r#"
            [[provider]]
            name = "a"
            aliases = ["same"]
            [[provider]]
            name = "b"
            aliases = ["Same"]
        "#;
        let err = ProviderAliases::default().merge(text, "f.toml", true).unwrap_err();
        assert!(err.to_string().contains("`same` is an alias of both `a` and `b`"), "{err}");
    }
}
