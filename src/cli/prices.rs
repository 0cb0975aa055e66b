//! `attempt-ledger prices`: the price table (docs/prices.md). `import`
//! converts another catalog into the price file; `show` prints the entry
//! that prices a model; `check` lists what the stored attempts needed and
//! the table lacked.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::{DbArg, ProvidersArg, WindowArgs, existing_db, exit};
use crate::report::prices::{check, check_table, show, show_table};
use crate::store::Store;
use attempt_core::pricing::PriceTable;
use attempt_core::pricing::import::{ImportOptions, from_litellm, from_openrouter};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Convert LiteLLM's model_prices_and_context_window.json or OpenRouter's
    /// /api/v1/models answer into a price file (what it could not state is
    /// summed up on stderr).
    Import(ImportArgs),
    /// Print the entry (its tiers and prompt sizes) that prices a model on a day.
    Show(ShowArgs),
    /// What the stored attempts needed and the table lacked (served models,
    /// tiers, prompt sizes, kinds), regional names priced without their
    /// region, and entries older than 90 days. Exit status 5 when an attempt
    /// lacks a price.
    Check(CheckArgs),
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum From {
    Litellm,
    Openrouter,
}

#[derive(Debug, clap::Args)]
struct ImportArgs {
    /// The catalog's format.
    #[arg(long, value_enum)]
    from: From,
    /// The catalog file.
    file: PathBuf,
    /// Write the price file here instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// The day the catalog was read (its rows' as-of date); default today.
    #[arg(long, value_name = "DATE")]
    as_of: Option<String>,
    /// The rows' source (default: the catalog's name and the file's).
    #[arg(long)]
    source: Option<String>,
    /// Keep the providers the alias table does not name, under LiteLLM's
    /// spelling (by default only those the table names are converted).
    #[arg(long)]
    all_providers: bool,
    #[command(flatten)]
    providers: ProvidersArg,
}

#[derive(Debug, clap::Args)]
struct ShowArgs {
    /// The served provider (any spelling the alias table knows).
    provider: String,
    /// The served model, as the provider names it.
    model: String,
    /// The day (RFC 3339, a date, or an age such as 30d); default today.
    #[arg(long)]
    at: Option<String>,
    /// A price file merged over the shipped one.
    #[arg(long, env = "ATTEMPT_LEDGER_PRICES", value_name = "FILE")]
    prices: Option<PathBuf>,
    #[command(flatten)]
    providers: ProvidersArg,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    #[command(flatten)]
    db: DbArg,
    /// Attempts that started at or after this time.
    #[arg(long)]
    since: Option<String>,
    /// Attempts that started before this time.
    #[arg(long)]
    until: Option<String>,
    /// A price file merged over the shipped one.
    #[arg(long, env = "ATTEMPT_LEDGER_PRICES", value_name = "FILE")]
    prices: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    Table,
    Json,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Import(args) => import(args),
        Command::Show(args) => show_entry(args),
        Command::Check(args) => check_db(args),
    }
}

fn import(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let text = attempt_core::files::read_bounded(&args.file, attempt_core::bill::MAX_INPUT_BYTES)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let today = chrono::Utc::now().date_naive();
    let as_of = match &args.as_of {
        Some(day) => chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d")
            .map_err(|_| anyhow::anyhow!("--as-of: {day:?} is not a day written YYYY-MM-DD"))?,
        None => today,
    };
    let catalog = match args.from {
        From::Litellm => "LiteLLM's price map",
        From::Openrouter => "OpenRouter's models answer",
    };
    let options = options(&args, as_of, catalog);
    let imported = match args.from {
        From::Litellm => from_litellm(&text, &args.providers.load()?, &options)?,
        From::Openrouter => from_openrouter(&text, &options)?,
    };
    let header = format!(
        "attempt-ledger price table, converted from {catalog} by `attempt-ledger prices import` (docs/prices.md).\n\
         USD per 1,000,000 tokens by kind (web_search: USD per request); a kind a row does not state has no\n\
         price, and an attempt that used it has unknown cost. Override or extend it with --prices FILE."
    );
    let file = imported.to_toml(&options, &header);
    // The file must read back: a catalog the converter misread fails here,
    // not in the next report.
    let mut check = PriceTable::default();
    check.merge(&file, "<converted>").context("the converted file does not read back")?;
    match &args.out {
        Some(path) => {
            std::fs::write(path, &file).with_context(|| format!("cannot write {}", path.display()))?
        }
        None => print!("{file}"),
    }
    eprint!("{}", imported.notes.summary());
    Ok(ExitCode::SUCCESS)
}

fn options(args: &ImportArgs, as_of: chrono::NaiveDate, catalog: &str) -> ImportOptions {
    let file_name = args.file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    ImportOptions {
        source: args.source.clone().unwrap_or_else(|| format!("{catalog} ({file_name})")),
        as_of,
        all_providers: args.all_providers,
    }
}

fn show_entry(args: ShowArgs) -> anyhow::Result<ExitCode> {
    let table = PriceTable::load(args.prices.as_deref())?;
    let provider = args.providers.load()?.canonical(&args.provider);
    let now = chrono::Utc::now();
    let at = match &args.at {
        Some(at) => attempt_core::time_arg::parse_time(at, now).map_err(|e| anyhow::anyhow!("--at: {e}"))?,
        None => now,
    };
    let Some(shown) = show(&table, &provider, &args.model, at.date_naive()) else {
        anyhow::bail!(
            "no entry prices {provider}/{} on {}: its attempts have unknown cost (no_price); add one with --prices FILE",
            args.model,
            at.date_naive()
        );
    };
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&shown)?),
        Format::Table => print!("{}", show_table(&shown)),
    }
    Ok(ExitCode::SUCCESS)
}

fn check_db(args: CheckArgs) -> anyhow::Result<ExitCode> {
    existing_db(&args.db.db)?;
    let table = PriceTable::load(args.prices.as_deref())?;
    let window = WindowArgs { since: args.since, until: args.until, workflow: None };
    let (since, until) = window.range()?;
    let store = Store::open(&args.db.db)?;
    let needs = store.price_needs(since, until)?;
    let checked = check(&needs, &table, chrono::Utc::now().date_naive());
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&checked)?),
        Format::Table => print!("{}", check_table(&checked)),
    }
    Ok(if checked.has_gaps() { ExitCode::from(exit::PRICE_GAPS) } else { ExitCode::SUCCESS })
}
