//! Command-line entry: parse, dispatch, turn errors into exit codes.

mod alerts;
mod audit;
mod demo;
mod dimensions;
mod export;
mod flags;
mod ingest;
mod lake;
mod prices;
mod prune;
mod quarantine;
mod rebuild;
mod reconcile;
mod remote;
mod report;
mod serve;
mod simulate;
mod tune;

pub use serve::InProcess;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit codes other than 0 (success) and 2 (usage, from clap).
pub mod exit {
    /// Any error that stopped the command.
    pub const FAILURE: u8 = 1;
    /// `ingest` stored what it could, but rejected some lines.
    pub const REJECTED_LINES: u8 = 3;
    /// `lake check` found bad files or gaps.
    pub const LAKE_PROBLEMS: u8 = 4;
    /// `prices check` found attempts the price table has no price for.
    pub const PRICE_GAPS: u8 = 5;
    /// The database's write-ahead log cannot be replayed; the message says
    /// what to do. Not worth a restart.
    pub const DAMAGED_WAL: u8 = crate::store::EXIT_DAMAGED_WAL;
}

#[derive(Debug, Parser)]
#[command(
    name = "attempt-ledger",
    version,
    about = "Observability and cost ledger for LLM API call attempts"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Args)]
struct DbArg {
    /// The DuckDB database file.
    #[arg(long, env = "ATTEMPT_LEDGER_DB", default_value = "attempt-ledger.duckdb")]
    db: PathBuf,
}

/// The workflows a report or an audit covers.
#[derive(Debug, clap::Args)]
struct WindowArgs {
    /// Workflows whose first attempt started at or after this time
    /// (RFC 3339, a date, or an age such as 24h).
    #[arg(long)]
    since: Option<String>,
    /// Workflows whose first attempt started before this time.
    #[arg(long)]
    until: Option<String>,
    /// Only workflows with this name (the records' `workflow` field).
    #[arg(long)]
    workflow: Option<String>,
}

type Instant = chrono::DateTime<chrono::Utc>;

impl WindowArgs {
    /// `--since` and `--until` as instants (ages counted back from now).
    fn range(&self) -> anyhow::Result<(Option<Instant>, Option<Instant>)> {
        let now = chrono::Utc::now();
        let parse = |arg: &Option<String>, flag: &str| {
            arg.as_deref()
                .map(|t| attempt_core::time_arg::parse_time(t, now))
                .transpose()
                .map_err(|e| anyhow::anyhow!("{flag}: {e}"))
        };
        Ok((parse(&self.since, "--since")?, parse(&self.until, "--until")?))
    }

    /// The window these flags select.
    fn window(&self) -> anyhow::Result<attempt_core::request::Window> {
        let (since, until) = self.range()?;
        Ok(attempt_core::request::Window { since, until, workflow: self.workflow.clone() })
    }
}

#[derive(Debug, clap::Args)]
struct ProvidersArg {
    /// A provider alias file merged over the shipped one
    /// (prices/providers.toml format).
    #[arg(long, env = "ATTEMPT_LEDGER_PROVIDERS", value_name = "FILE")]
    providers: Option<PathBuf>,
}

impl ProvidersArg {
    fn load(&self) -> anyhow::Result<attempt_core::providers::ProviderAliases> {
        Ok(attempt_core::providers::ProviderAliases::load(self.providers.as_deref())?)
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show the alert history, or replay alert rules over stored data (--check).
    Alerts(alerts::Args),
    /// Check stored traffic against recovery rules: retried non-retryable
    /// failures, fallbacks after refusals, replays after commits, ignored
    /// retry-after, timed-out output retried.
    Audit(audit::Args),
    /// Simulate an incident, ingest it into a fresh database and print the report.
    Demo(demo::Args),
    /// Show or set the dimensions (team, customer, ...) reports can group by.
    Dimensions(dimensions::Args),
    /// Write to the attempt lake (Parquet that Spark, ClickHouse and DuckDB
    /// read) what it does not hold yet of the database, and exit.
    Export(export::Args),
    /// Ingest attempt records, OTLP exports, LiteLLM or OpenRouter logs (JSONL;
    /// `-` is stdin; `.gz` files are decompressed).
    Ingest(ingest::Args),
    /// Look after an attempt lake: `lake check DIR`.
    Lake(lake::Args),
    /// The price table: `prices import` converts LiteLLM's or OpenRouter's
    /// catalog into a price file, `prices show` prints a model's entry,
    /// `prices check` lists what the stored attempts needed and it lacked.
    Prices(prices::Args),
    /// Delete workflows that started before a date (retention), and compact the file.
    Prune(prune::Args),
    /// List the workflows set aside because their derivation failed.
    Quarantine(quarantine::Args),
    /// Re-apply the provider alias table and derive every fact, rollup and
    /// total again from the stored attempts (quarantined workflows too).
    Rebuild(rebuild::Args),
    /// Hold the ledger against the provider's bill: `reconcile import
    /// --source SOURCE FILE...` stores the provider's usage and cost
    /// exports; `reconcile` compares them with the attempts, cell by cell,
    /// and says why they differ.
    Reconcile(reconcile::Args),
    /// Print the recovery, waste and cost report.
    Report(report::Args),
    /// Run the service: HTTP API, OTLP/HTTP and OTLP/gRPC receivers, reports.
    Serve(Box<serve::Args>),
    /// Write realistic JSONL attempt records for a named scenario to stdout.
    Simulate(simulate::Args),
    /// The value of each retry in recorded traffic, and exact replays of a
    /// stricter recovery policy (--policy FILE, --set KEY=VALUE).
    Tune(tune::Args),
}

pub fn main() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Alerts(args) => alerts::run(args),
        Command::Audit(args) => audit::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Dimensions(args) => dimensions::run(args),
        Command::Export(args) => export::run(args),
        Command::Ingest(args) => ingest::run(args),
        Command::Lake(args) => lake::run(args),
        Command::Prices(args) => prices::run(args),
        Command::Prune(args) => prune::run(args),
        Command::Quarantine(args) => quarantine::run(args),
        Command::Rebuild(args) => rebuild::run(args),
        Command::Reconcile(args) => reconcile::run(args),
        Command::Report(args) => report::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Tune(args) => tune::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            match err.downcast_ref::<crate::store::StoreError>() {
                Some(crate::store::StoreError::DamagedWal { .. }) => ExitCode::from(exit::DAMAGED_WAL),
                _ => ExitCode::from(exit::FAILURE),
            }
        }
    }
}

/// A reader over the database `db` with the price and policy files given;
/// `None` once a running `serve` that holds the file answered
/// `path_and_query` instead (`remote::open_or_ask`).
fn reader_or_ask(
    db: &std::path::Path,
    prices: Option<&std::path::Path>,
    policy: Option<&std::path::Path>,
    path_and_query: impl FnOnce() -> String,
) -> anyhow::Result<Option<crate::read::Reader>> {
    existing_db(db)?;
    let loaded_prices = attempt_core::pricing::PriceTable::load(prices)?;
    let loaded_policy = attempt_core::policy::LoadedPolicy::load(policy)?;
    let files = [("--prices", prices.is_some()), ("--policy", policy.is_some())];
    let store = remote::open_or_ask(db, &files, path_and_query)?;
    Ok(store.map(|store| crate::read::Reader::new(store, loaded_prices.into(), loaded_policy.into())))
}

/// A command that reads a database refuses one that is not there (opening
/// would create an empty one).
fn existing_db(db: &std::path::Path) -> anyhow::Result<()> {
    if !db.exists() {
        anyhow::bail!("no database at {}: run `attempt-ledger ingest` first, or pass --db", db.display());
    }
    Ok(())
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("ATTEMPT_LEDGER_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
