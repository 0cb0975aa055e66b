//! `attempt-ledger audit`: where retries and fallbacks broke recovery rules.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{DbArg, WindowArgs, remote};
use crate::report::Format;

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
    let window = args.window.window()?;
    let asked = || {
        let mut query = remote::window_query(&window);
        query.push(("format", Some(remote::value_name(args.format))));
        remote::path_with("/api/v1/audit", &query)
    };
    let Some(reader) =
        super::reader_or_ask(&args.db.db, args.prices.as_deref(), args.policy.as_deref(), asked)?
    else {
        return Ok(ExitCode::SUCCESS);
    };
    print!("{}", reader.audit(window)?.render(args.format));
    Ok(ExitCode::SUCCESS)
}
