//! `attempt-ledger audit`: where retries and fallbacks broke recovery rules.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use chrono::Utc;

use super::DbArg;
use crate::pricing::PriceTable;
use crate::report::audit::LoadedPolicy;
use crate::report::{Format, parse_time};
use crate::store::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: DbArg,
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
    /// A recovery policy file (examples/policy.toml): each workflow's
    /// retryable classes, limits and approved fallbacks. Default: built-in
    /// rules that need no policy.
    #[arg(long, env = "ATTEMPT_LEDGER_POLICY")]
    policy: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// A price file that overrides or extends the built-in table.
    #[arg(long, env = "ATTEMPT_LEDGER_PRICES")]
    prices: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !args.db.db.exists() {
        bail!("no database at {}: run `attempt-ledger ingest` first, or pass --db", args.db.db.display());
    }
    let now = Utc::now();
    let parse = |arg: &Option<String>, flag: &str| {
        arg.as_deref().map(|t| parse_time(t, now)).transpose().map_err(|e| anyhow::anyhow!("{flag}: {e}"))
    };
    let policy = LoadedPolicy::load(args.policy.as_deref())?;
    let filter = policy.filter(parse(&args.since, "--since")?, parse(&args.until, "--until")?, args.workflow);
    let prices = PriceTable::load(args.prices.as_deref())?;
    let store = Store::open(&args.db.db)?;
    let audit = policy.audit(&store.audit(&filter, &prices)?);
    print!("{}", audit.render(args.format));
    Ok(ExitCode::SUCCESS)
}
