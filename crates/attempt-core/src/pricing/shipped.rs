//! The shipped table, indexed by provider and model and each entry parsed
//! the first time one of its prices is asked. Parsing the whole file (some
//! 400 KB of TOML) takes 20-30 ms, more than a report's own queries, and a
//! report prices the few models that served it.
//!
//! The index relies on the importer's layout (`PriceImport::to_toml`): a
//! `[[provider]]` block with its `name` line first and `models = [` last,
//! then one row a line, each model's rows together, then `]`. A text that
//! does not keep to it (a `[[discount]]`, other content, a name twice) is
//! parsed whole instead, so an answer never depends on the index.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use super::{BUILTIN_PRICES, PriceTable, Row};

const PATH: &str = "<built-in prices.toml>";
const HEADER: &str = "[[provider]]\n";
const ROWS_OPEN: &str = "models = [\n";
const ROW_START: &str = "  { model = \"";

/// The shipped table as the price table reads it.
pub(super) enum Shipped {
    /// Entries by provider, then model, each parsed on first use.
    Indexed(BTreeMap<String, Provider>),
    /// The whole text, parsed at once.
    Whole(Box<PriceTable>),
}

pub(super) struct Provider {
    /// `[[provider]]` through `models = [`: the block's own keys.
    head: &'static str,
    pub(super) models: BTreeMap<&'static str, Entry>,
}

pub(super) struct Entry {
    /// The model's row lines.
    lines: &'static str,
    rows: OnceLock<Vec<Row>>,
}

impl Provider {
    /// The rows of `model`, as a merged table holds them (sorted).
    pub(super) fn rows(&self, model: &str) -> Option<&[Row]> {
        let entry = self.models.get(model)?;
        let rows = entry.rows.get_or_init(|| {
            let table = parsed(&format!("{}{}]\n", self.head, entry.lines));
            table.models.into_values().next().unwrap_or_default()
        });
        Some(rows)
    }
}

/// The shipped table, indexed once per process.
pub(super) fn shipped() -> &'static Shipped {
    static SHIPPED: OnceLock<Shipped> = OnceLock::new();
    SHIPPED.get_or_init(|| match index(BUILTIN_PRICES) {
        Some(providers) => Shipped::Indexed(providers),
        None => Shipped::Whole(Box::new(parsed(BUILTIN_PRICES))),
    })
}

fn parsed(text: &str) -> PriceTable {
    let mut table = PriceTable::default();
    table.merge(text, PATH).expect("the shipped price table is valid (tested)");
    table
}

/// Entries by provider and model, or `None` when the text is not laid out
/// as the importer writes it.
pub(super) fn index(text: &'static str) -> Option<BTreeMap<String, Provider>> {
    if text.contains("[[discount]]") {
        return None;
    }
    let starts: Vec<usize> = text.match_indices(&format!("\n{HEADER}")).map(|(at, _)| at + 1).collect();
    let prelude = &text[..starts.first().copied().unwrap_or(text.len())];
    if !only_comments(prelude) {
        return None;
    }
    let mut providers = BTreeMap::new();
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(text.len());
        let (name, provider) = provider(&text[start..end])?;
        if providers.insert(name, provider).is_some() {
            return None;
        }
    }
    Some(providers)
}

/// One `[[provider]]` block: its name and its entries.
fn provider(block: &'static str) -> Option<(String, Provider)> {
    let head_end = block.find(&format!("\n{ROWS_OPEN}"))? + 1 + ROWS_OPEN.len();
    let (head, body) = block.split_at(head_end);
    let name = provider_name(head.strip_prefix(HEADER)?.lines().next()?)?;
    let close = body.find("\n]\n").map(|at| at + 1).or_else(|| body.starts_with("]\n").then_some(0))?;
    let (rows, rest) = body.split_at(close);
    if !only_comments(&rest["]\n".len()..]) {
        return None;
    }
    let mut models: BTreeMap<&'static str, Entry> = BTreeMap::new();
    let mut run: Option<(&'static str, usize)> = None;
    let mut at = 0;
    for line in rows.split_inclusive('\n') {
        let model = row_model(line)?;
        match run {
            Some((current, _)) if current == model => {}
            _ => {
                if let Some((current, from)) = run {
                    models.insert(current, Entry { lines: &rows[from..at], rows: OnceLock::new() });
                }
                if models.contains_key(model) {
                    return None;
                }
                run = Some((model, at));
            }
        }
        at += line.len();
    }
    if let Some((current, from)) = run {
        models.insert(current, Entry { lines: &rows[from..at], rows: OnceLock::new() });
    }
    Some((name, Provider { head, models }))
}

/// The model a row line names: `  { model = "NAME", ... },` with a name
/// that needs no escapes.
fn row_model(line: &'static str) -> Option<&'static str> {
    let rest = line.strip_prefix(ROW_START)?;
    let name = &rest[..rest.find('"')?];
    (!name.contains('\\') && line.ends_with("},\n")).then_some(name)
}

/// The provider a block names on its first line, as `file::check` reads it.
fn provider_name(line: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct NameLine {
        name: String,
    }
    let parsed: NameLine = toml::from_str(line).ok()?;
    Some(parsed.name.trim().to_ascii_lowercase())
}

fn only_comments(text: &str) -> bool {
    text.lines().all(|line| line.trim().is_empty() || line.trim_start().starts_with('#'))
}
