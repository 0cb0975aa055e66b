//! `attempt-ledger tune`: the value of each retry in recorded traffic, and
//! what a stricter policy would have done to it (docs/record-format.md,
//! "Tuning recovery").

use std::path::PathBuf;
use std::process::ExitCode;

use super::{DbArg, WindowArgs, remote};
use crate::read::Candidate;
use crate::report::Format;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: DbArg,
    #[command(flatten)]
    window: WindowArgs,
    /// Replay this policy file (the audit's keys, and tune's: max_retries,
    /// max_route_attempts, fallback, fallback_on): only the keys it gives
    /// are applied.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Replay this limit, over --policy's in every section (repeatable):
    /// `max_total_attempts=3`, `max_retries.sdk=2`, `no_retry_on=quota,auth`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Write to FILE, in the policy file's format, the smallest limits
    /// (retries per layer, fallback classes) whose replay keeps each
    /// workflow name's success within --tolerance, and print what each saves.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["policy", "set"])]
    suggest: Option<PathBuf>,
    /// How much success a suggested limit may lose, in percentage points of
    /// the workflow name's workflows (0 to 100).
    #[arg(long, default_value_t = 0.1, value_parser = tolerance, requires = "suggest")]
    tolerance: f64,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// A price file that overrides or extends the built-in table.
    #[arg(long, env = "ATTEMPT_LEDGER_PRICES")]
    prices: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let filter = args.window.window()?.report(attempt_core::request::DEFAULT_RETRY_BUDGET, None);
    let candidate = Candidate::from_flags(args.policy.as_deref(), &args.set)?;
    let asked = || {
        let mut query = remote::window_query(&attempt_core::request::Window::from(&filter));
        query.extend(args.set.iter().map(|s| ("set", Some(s.clone()))));
        query.push(("format", Some(remote::value_name(args.format))));
        remote::path_with("/api/v1/tune", &query)
    };
    super::existing_db(&args.db.db)?;
    let prices = attempt_core::pricing::PriceTable::load(args.prices.as_deref())?;
    let files = [("--prices", args.prices.is_some()), ("--policy", args.policy.is_some())];
    let Some(store) = remote::open_or_ask(&args.db.db, &files, asked)? else {
        return Ok(ExitCode::SUCCESS);
    };
    let reader = crate::read::Reader::new(store, prices.into(), Default::default());
    if let Some(path) = &args.suggest {
        let suggestion = reader.suggest(&filter, args.tolerance)?;
        std::fs::write(path, &suggestion.policy)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        print!("{}", suggestion.render(args.format));
        if args.format == Format::Table {
            println!("written to {}: attempt-ledger audit --policy {0} checks it", path.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", reader.tune(&filter, candidate.as_ref())?.render(args.format));
    Ok(ExitCode::SUCCESS)
}

fn tolerance(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(pp) if (0.0..=100.0).contains(&pp) => Ok(pp),
        _ => Err(format!("{text:?} is not a number of percentage points from 0 to 100")),
    }
}
