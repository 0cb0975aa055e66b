//! `attempt-ledger report`: the recovery, waste and cost report.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{DbArg, WindowArgs, remote};
use crate::report::{Format, render};
use crate::request::Window;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: DbArg,
    #[command(flatten)]
    window: WindowArgs,
    /// Also group outcomes and cost by this dimension (`attempt-ledger dimensions`).
    #[arg(long, value_name = "DIMENSION")]
    group_by: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Retry-ratio budget per minute, as a fraction (0.1 = 10 %).
    #[arg(long, default_value_t = crate::request::DEFAULT_RETRY_BUDGET, value_parser = crate::request::retry_budget)]
    retry_budget: f64,
    /// A price file that overrides or extends the built-in table.
    #[arg(long, env = "ATTEMPT_LEDGER_PRICES")]
    prices: Option<PathBuf>,
    /// The recovery policy of the report's audit section (TOML,
    /// `examples/policy.toml`); without it, the built-in rules.
    #[arg(long, value_name = "FILE", conflicts_with = "no_audit")]
    policy: Option<PathBuf>,
    /// Leave the audit section out (the report alone, as alerts and the
    /// dashboard's pages read it).
    #[arg(long)]
    no_audit: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let filter = args.window.window()?.report(args.retry_budget, args.group_by);
    let asked = || {
        let mut query = remote::window_query(&Window::from(&filter));
        query.extend([
            ("group_by", filter.group_by.clone()),
            ("retry_budget", Some(filter.retry_budget.to_string())),
            ("audit", args.no_audit.then(|| "false".to_string())),
            ("format", Some(remote::value_name(args.format))),
        ]);
        remote::path_with("/api/v1/report", &query)
    };
    let Some(reader) =
        super::reader_or_ask(&args.db.db, args.prices.as_deref(), args.policy.as_deref(), asked)?
    else {
        return Ok(ExitCode::SUCCESS);
    };
    print!("{}", render(&reader.report(&filter, !args.no_audit)?, args.format));
    Ok(ExitCode::SUCCESS)
}
