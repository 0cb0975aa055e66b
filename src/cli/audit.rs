//! `attempt-ledger audit`: where retries and fallbacks broke recovery rules.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;

use super::{DbArg, WindowArgs, remote};
use crate::pricing::PriceTable;
use crate::read::Reader;
use crate::report::Format;
use crate::report::audit::LoadedPolicy;
use crate::store::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: DbArg,
    #[command(flatten)]
    window: WindowArgs,
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
    let policy = LoadedPolicy::load(args.policy.as_deref())?;
    let window = args.window.window()?;
    let prices = PriceTable::load(args.prices.as_deref())?;
    let store = match Store::open_for_reading(&args.db.db) {
        Ok(store) => store,
        Err(err) => {
            let files = [("--prices", args.prices.is_some()), ("--policy", args.policy.is_some())];
            let asked = remote::answer_instead(&args.db.db, &err, &files, || {
                remote::path_with(
                    "/api/v1/audit",
                    &[
                        ("since", remote::instant(window.since)),
                        ("until", remote::instant(window.until)),
                        ("workflow", window.workflow.clone()),
                        ("format", Some(remote::value_name(args.format))),
                    ],
                )
            })?;
            return if asked { Ok(ExitCode::SUCCESS) } else { Err(err.into()) };
        }
    };
    let audit = Reader::new(store, Arc::new(prices), Arc::new(policy)).audit(window)?;
    print!("{}", audit.render(args.format));
    Ok(ExitCode::SUCCESS)
}
