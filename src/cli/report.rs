//! `attempt-ledger report`: the recovery, waste and cost report.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;

use super::{DbArg, WindowArgs, remote};
use crate::pricing::PriceTable;
use crate::read::Reader;
use crate::report::audit::LoadedPolicy;
use crate::report::{Format, render};
use crate::request::ReportFilter;
use crate::store::Store;

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
    if !args.db.db.exists() {
        bail!("no database at {}: run `attempt-ledger ingest` first, or pass --db", args.db.db.display());
    }
    let window = args.window.window()?;
    let filter = ReportFilter {
        since: window.since,
        until: window.until,
        workflow: window.workflow,
        retry_budget: args.retry_budget,
        group_by: args.group_by,
    };
    let prices = PriceTable::load(args.prices.as_deref())?;
    let policy = LoadedPolicy::load(args.policy.as_deref())?;
    let store = match Store::open_for_reading(&args.db.db) {
        Ok(store) => store,
        Err(err) => {
            let files = [("--prices", args.prices.is_some()), ("--policy", args.policy.is_some())];
            let asked = remote::answer_instead(&args.db.db, &err, &files, || {
                remote::path_with(
                    "/api/v1/report",
                    &[
                        ("since", remote::instant(filter.since)),
                        ("until", remote::instant(filter.until)),
                        ("workflow", filter.workflow.clone()),
                        ("group_by", filter.group_by.clone()),
                        ("retry_budget", Some(filter.retry_budget.to_string())),
                        ("audit", args.no_audit.then(|| "false".to_string())),
                        ("format", Some(remote::value_name(args.format))),
                    ],
                )
            })?;
            return if asked { Ok(ExitCode::SUCCESS) } else { Err(err.into()) };
        }
    };
    let report = Reader::new(store, Arc::new(prices), Arc::new(policy)).report(&filter, !args.no_audit)?;
    print!("{}", render(&report, args.format));
    Ok(ExitCode::SUCCESS)
}
