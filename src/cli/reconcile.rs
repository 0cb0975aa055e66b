//! `attempt-ledger reconcile`: hold the ledger against the provider's bill
//! (docs/reconcile.md). `reconcile import` stores the provider's exports;
//! `reconcile` compares.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::{DbArg, remote};
use crate::admin_api::{Key, Plan, Provider, fetch};
use crate::report::Format;
use crate::report::reconcile::render;
use crate::store::Store;
use attempt_core::bill::{BillSource, read_pages};
use attempt_core::reconcile::Question;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    #[command(flatten)]
    compare: CompareArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Store the provider's usage or cost export pages (as the admin API
    /// returns them: one page, pages one after another, or one per line).
    /// Re-importing a window replaces it.
    Import(ImportArgs),
    /// Read the provider's usage and cost pages from its admin API (the key
    /// from OPENAI_ADMIN_KEY, ANTHROPIC_ADMIN_KEY or OPENROUTER_API_KEY),
    /// paging and waiting as it asks, and import them.
    Fetch(FetchArgs),
}

#[derive(Debug, clap::Args)]
struct FetchArgs {
    #[command(flatten)]
    db: DbArg,
    /// openai, anthropic or openrouter.
    #[arg(long, value_enum)]
    source: Provider,
    /// From this time (RFC 3339, a date, or an age such as 2d).
    #[arg(long)]
    since: String,
    /// Before this time; default now.
    #[arg(long)]
    until: Option<String>,
    /// Another address for the API (a proxy), instead of the provider's.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
}

#[derive(Debug, clap::Args)]
struct ImportArgs {
    #[command(flatten)]
    db: DbArg,
    /// openai-usage, openai-costs, anthropic-usage, anthropic-cost or
    /// openrouter-activity.
    #[arg(long, value_parser = source)]
    source: BillSource,
    /// Files of pages; every file is read before anything is stored.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct CompareArgs {
    #[command(flatten)]
    db: DbArg,
    /// Cells from this time (RFC 3339, a date, or an age such as 7d);
    /// default 7 days before --until.
    #[arg(long)]
    since: Option<String>,
    /// Cells before this time; default now.
    #[arg(long)]
    until: Option<String>,
    /// Cell length: day or hour (UTC; cost exports are daily, so hour cells
    /// compare usage only).
    #[arg(long)]
    grain: Option<String>,
    /// A drift this small, in USD, is a match (default 0.01).
    #[arg(long)]
    tolerance_usd: Option<String>,
    /// A drift this small, in percent of the provider's cost, is a match
    /// (default 1; the larger tolerance wins).
    #[arg(long)]
    tolerance_pct: Option<String>,
    /// Cells that ended less than this many hours ago are unsettled: the
    /// provider may still add to them (default 24, at most 744).
    #[arg(long)]
    settle_hours: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// A price file that overrides or extends the built-in table.
    #[arg(long, env = "ATTEMPT_LEDGER_PRICES")]
    prices: Option<PathBuf>,
}

impl CompareArgs {
    /// The flags as the route's parameters, so both are checked by one rule.
    fn params(&self) -> Vec<(&'static str, String)> {
        [
            ("since", &self.since),
            ("until", &self.until),
            ("grain", &self.grain),
            ("tolerance_usd", &self.tolerance_usd),
            ("tolerance_pct", &self.tolerance_pct),
            ("settle_hours", &self.settle_hours),
        ]
        .into_iter()
        .filter_map(|(key, value)| value.clone().map(|v| (key, v)))
        .collect()
    }
}

fn source(text: &str) -> Result<BillSource, String> {
    text.parse().map_err(|_| format!("`{text}` is not a source: use one of {}", BillSource::names()))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Some(Action::Import(import)) => run_import(import),
        Some(Action::Fetch(fetch)) => run_fetch(fetch),
        None => run_compare(args.compare),
    }
}

fn run_import(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let mut read = Vec::with_capacity(args.files.len());
    for path in &args.files {
        let text = attempt_core::files::read_bounded(path, attempt_core::bill::MAX_INPUT_BYTES)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        let pages = read_pages(args.source, &text).map_err(|reason| {
            anyhow::anyhow!("{}: not {} pages: {reason}", path.display(), args.source.name())
        })?;
        read.push((path, pages));
    }
    let store = Store::open(&args.db.db)?;
    for (path, pages) in &read {
        let done = store.import_bill(pages)?;
        println!(
            "{}: {} pages, {} buckets, {} facts stored ({} buckets and {} facts of earlier imports replaced)",
            path.display(),
            pages.pages,
            done.buckets,
            done.facts,
            done.replaced_buckets,
            done.replaced_facts
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn run_fetch(args: FetchArgs) -> anyhow::Result<ExitCode> {
    let now = chrono::Utc::now();
    let since =
        attempt_core::time_arg::parse_time(&args.since, now).map_err(|e| anyhow::anyhow!("--since: {e}"))?;
    let until = match &args.until {
        Some(t) => attempt_core::time_arg::parse_time(t, now).map_err(|e| anyhow::anyhow!("--until: {e}"))?,
        None => now,
    };
    let base_url = match &args.base_url {
        Some(url) if url.starts_with("http://") || url.starts_with("https://") => url.clone(),
        Some(url) => anyhow::bail!("--base-url: `{url}` is not an http:// or https:// address"),
        None => args.source.default_base_url().to_string(),
    };
    let key = Key::from_env(args.source)?;
    let plan = Plan { provider: args.source, since, until, base_url };
    let fetched = fetch(&plan, &key)?;
    let store = Store::open(&args.db.db)?;
    for f in &fetched {
        let done = store.import_bill(&f.pages)?;
        println!(
            "{}: {} pages in {} requests ({} answered 429), {} buckets, {} facts stored ({} buckets and {} facts of earlier imports replaced)",
            f.pages.source.name(),
            f.pages.pages,
            f.requests,
            f.throttled,
            done.buckets,
            done.facts,
            done.replaced_buckets,
            done.replaced_facts
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn run_compare(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let params = args.params();
    let question = Question::from_params(params.as_slice(), chrono::Utc::now())?;
    let asked = || {
        let mut query: Vec<(&str, Option<String>)> =
            params.iter().map(|(k, v)| (*k, Some(v.clone()))).collect();
        query.push(("format", Some(remote::value_name(args.format))));
        remote::path_with("/api/v1/reconcile", &query)
    };
    let Some(reader) = super::reader_or_ask(&args.db.db, args.prices.as_deref(), None, asked)? else {
        return Ok(ExitCode::SUCCESS);
    };
    print!("{}", render(&reader.reconcile(&question)?, args.format));
    Ok(ExitCode::SUCCESS)
}
