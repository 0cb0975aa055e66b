//! `attempt-ledger report`: the recovery, waste and cost report.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{DbArg, WindowArgs, remote};
use crate::lake::read::{BadFiles, Sections};
use crate::report::prices::STALE_AFTER_DAYS;
use crate::report::{Format, render};
use attempt_core::request::Window;

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
    #[arg(long, default_value_t = attempt_core::request::DEFAULT_RETRY_BUDGET, value_parser = attempt_core::request::retry_budget)]
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
    /// Answer from the attempt lake instead of --db: one report over every
    /// node that exports to it (docs/lake.md). A folder, or an object
    /// store's URL (s3://BUCKET/PREFIX, gs://, az://), whose files are
    /// copied to a temporary folder to be read.
    #[arg(long, value_name = "LAKE", conflicts_with = "group_by", value_parser = crate::lake::storage::Location::parse)]
    lake: Option<crate::lake::storage::Location>,
    /// How far around --since and --until the lake is read ("48h"): a
    /// workflow counts by its first attempt, so its attempts around the
    /// window are read too. The report says how many fell outside.
    #[arg(long, default_value = "48h", value_parser = super::flags::horizon, requires = "lake")]
    horizon: std::time::Duration,
    /// Report from the lake's good files when some cannot be read or do
    /// not belong to it (by default such a lake is refused, naming them):
    /// the report's `lake` section lists what was left out.
    #[arg(long, requires = "lake")]
    skip_bad_files: bool,
    /// Derive every section of the report from the lake, and the audit
    /// (unless --no-audit), as the write path derives them: about 20-30 µs
    /// an attempt read, where the default derives by SQL the sections every
    /// lake engine does (outcomes, waste, cost by served model, per
    /// workflow, amplification, primary routes, fallbacks) in a few.
    #[arg(long, requires = "lake")]
    every_section: bool,
    /// With --lake: read the lake's Iceberg table through this catalog,
    /// its current snapshot's files (docs/lake.md).
    #[command(flatten)]
    table: super::export::TableArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let filter = args.window.window()?.report(args.retry_budget, args.group_by);
    if args.lake.is_none()
        && args.table.catalog.is_some()
        && std::env::var_os(super::export::CATALOG_ENV).is_none()
    {
        anyhow::bail!("--catalog reads a lake's Iceberg table: it needs --lake LAKE");
    }
    if let Some(lake) = &args.lake {
        let prices = attempt_core::pricing::PriceTable::load(args.prices.as_deref())?;
        let policy = attempt_core::policy::LoadedPolicy::load(args.policy.as_deref())?;
        let horizon = chrono::Duration::from_std(args.horizon)?;
        let bad_files = if args.skip_bad_files { BadFiles::Skip } else { BadFiles::Refuse };
        if args.policy.is_some() && !args.every_section {
            anyhow::bail!(
                "--policy audits the lake's workflows, which only --every-section derives: add it (or leave out --policy)"
            );
        }
        let sections =
            if args.every_section { Sections::Every { with_audit: !args.no_audit } } else { Sections::Lake };
        let table = args.table.config();
        let source = crate::lake::read::Source { location: lake, table: table.as_ref() };
        let report = crate::lake::read::lake_report(
            source,
            &filter,
            horizon,
            bad_files,
            prices.into(),
            policy.into(),
            sections,
        )?;
        if let Some(source) = report.lake.as_ref().filter(|l| !l.skipped_files.is_empty()) {
            for file in &source.skipped_files {
                eprintln!("skipped {}: {}", file.path, file.reason);
            }
            let unknown = source.skipped_files.iter().filter(|f| f.attempts.is_none()).count();
            eprintln!(
                "the report leaves out {} files holding {} attempts{}",
                source.skipped_files.len(),
                source.skipped_attempts,
                if unknown > 0 {
                    format!(", and {unknown} files no export's record lists")
                } else {
                    String::new()
                }
            );
        }
        warn_stale_prices(&report);
        print!("{}", render(&report, args.format));
        return Ok(ExitCode::SUCCESS);
    }
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
    let report = reader.report(&filter, !args.no_audit)?;
    warn_stale_prices(&report);
    print!("{}", render(&report, args.format));
    Ok(ExitCode::SUCCESS)
}

/// Says on stderr which served providers were priced by entries read more
/// than `STALE_AFTER_DAYS` ago: providers change prices more often, and the
/// report's dollars are only as current as its table.
fn warn_stale_prices(report: &crate::report::Report) {
    let today = chrono::Utc::now().date_naive();
    for served in &report.by_served_provider {
        let Some(as_of) = served.prices_as_of.as_deref() else { continue };
        let Ok(day) = chrono::NaiveDate::parse_from_str(as_of, "%Y-%m-%d") else { continue };
        let age = (today - day).num_days();
        if age > STALE_AFTER_DAYS {
            eprintln!(
                "warning: {} was priced with prices as of {as_of}, {age} days old: \
                 update them (`prices import`, docs/prices.md) or see `prices check`",
                served.served_provider
            );
        }
    }
}
