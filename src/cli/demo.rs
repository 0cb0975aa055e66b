//! `attempt-ledger demo`: a simulated night of incidents in, the report out.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;

use crate::pipeline::ingest_sources;
use crate::read::Reader;
use crate::report::{Format, render};
use crate::simulate::{Scenario, SimOptions, default_start, simulate, simulate_breaker};
use crate::store::Store;
use attempt_core::ingest::source::Source;
use attempt_core::pricing::PriceTable;
use attempt_core::request::ReportFilter;

/// The night the demo replays: a batch hit by a 529 storm, interactive chat
/// falling back on 429s, a gateway serving from another provider, two
/// callers whose recovery code breaks the rules the audit checks, and two
/// jobs priced as the bill charges them (the Batch API and the flex tier;
/// long prompts written to a one-hour cache).
const SCENARIOS: [(Scenario, &str); 7] = [
    (Scenario::Overnight529Storm, "overnight-529-storm"),
    (Scenario::RateLimitFallback, "rate-limit-fallback"),
    (Scenario::GatewayReroute, "gateway-reroute"),
    (Scenario::NaiveRetries, "naive-retries"),
    (Scenario::UnsafeFallback, "unsafe-fallback"),
    (Scenario::ReportBatch, "report-batch"),
    (Scenario::LongDocuments, "long-documents"),
];

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to write the simulated JSONL files and the demo database
    /// (default: a new private directory, attempt-ledger-demo-XXXXXX, in
    /// the system's temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn private_dir_builder<'a>() -> tempfile::Builder<'a, 'a> {
    let mut builder = tempfile::Builder::new();
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700));
    builder
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let began = Instant::now();
    let dir = match args.dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            dir
        }
        // A fixed name under a shared /tmp could be created first by another
        // user, or be a symlink to their files: each run gets a new
        // directory only its user can enter, kept for the next commands.
        None => private_dir_builder()
            .prefix("attempt-ledger-demo-")
            .tempdir()
            .context("cannot create a directory for the demo in the temporary directory")?
            .keep(),
    };
    let db = dir.join("demo.duckdb");
    for stale in [db.clone(), dir.join("demo.duckdb.wal")] {
        if stale.exists() {
            std::fs::remove_file(&stale).with_context(|| format!("cannot remove {}", stale.display()))?;
        }
    }
    let mut sources = Vec::new();
    for (scenario, file_name) in SCENARIOS {
        let path = dir.join(format!("{file_name}.jsonl"));
        let mut out =
            BufWriter::new(File::create(&path).with_context(|| format!("cannot write {}", path.display()))?);
        let options =
            SimOptions { scenario, workflows: None, seed: args.seed, start: default_start(), span: None };
        let records = simulate(&options, &mut out)?;
        eprintln!("simulated {file_name}: {records} attempts -> {}", path.display());
        sources.push(Source::File(path));
        // The gateway's breaker, a file of its own as a gateway would log it.
        let breaker = dir.join(format!("{file_name}-breaker.jsonl"));
        let mut changes = Vec::new();
        if simulate_breaker(&options, &mut changes)? > 0 {
            std::fs::write(&breaker, &changes)
                .with_context(|| format!("cannot write {}", breaker.display()))?;
            eprintln!("simulated {file_name}'s breaker -> {}", breaker.display());
            sources.push(Source::File(breaker));
        }
    }
    let store = Store::open(&db)?;
    let summary = ingest_sources(&store, &sources, None, true)?;
    eprintln!(
        "ingested {} records into {} in {:.1} s\n",
        summary.stored.inserted,
        db.display(),
        began.elapsed().as_secs_f64()
    );
    let imported = import_bills(&store, &dir, &db.display().to_string())?;
    let reader = Reader::new(store, Arc::new(PriceTable::load(None)?), Arc::default());
    let report = reader.report(&ReportFilter::default(), true)?;
    print!("{}", render(&report, Format::Table));
    for warning in headroom_warnings(&report) {
        println!("\n{warning}");
    }
    for refusal in quota_refusals(&report) {
        println!("\n{refusal}");
    }
    if let Some(breaker) = breaker_summary(&report) {
        println!("\n{breaker}");
    }
    let db_text = db.display();
    println!("\n{}", tune_teaser(&reader, &db_text.to_string())?);
    println!("\n{}", reconcile_section(&reader, &imported)?);
    let storm_file = dir.join("overnight-529-storm.jsonl");
    println!(
        "\nNext:\n  \
         attempt-ledger report --db {db_text} --workflow nightly-classify      # one workflow\n  \
         attempt-ledger report --db {db_text} --format json                    # the same, for scripts\n  \
         attempt-ledger audit --db {db_text} --workflow nightly-classify --format json   # its recovery findings\n  \
         attempt-ledger report --db {db_text} --since 2026-11-28T02:40:00Z --until 2026-11-28T03:00:00Z\n  \
         attempt-ledger ingest --db my.duckdb {}                                # your own copy\n  \
         attempt-ledger simulate --scenario quota-exhausted | attempt-ledger ingest --db my.duckdb -\n  \
         attempt-ledger tune --db {db_text}                                      # the value of each retry\n  \
         attempt-ledger reconcile --db {db_text} --since 2026-11-28 --until 2026-11-29 --format json   # the night against its bill\n  \
         attempt-ledger alerts --check --db {db_text} --rules examples/alerts.toml --step 5m   # which alerts would have fired\n  \
         attempt-ledger serve --db {db_text} --rules examples/alerts.toml       # live: the dashboard at http://127.0.0.1:4318/, /metrics",
        storm_file.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Attempts the account itself was refused (a 402, an exhausted quota):
/// counted apart from rate limits, since no retry or wait fixes them.
fn quota_refusals(report: &crate::report::Report) -> Vec<String> {
    report
        .error_classes
        .iter()
        .filter(|e| e.error_class == attempt_core::model::ErrorClass::Quota)
        .map(|e| {
            format!(
                "Quota: {} attempts to {} were refused for the account (HTTP 402 or an exhausted quota: class \
                 quota, never rate_limit), which no retry fixes; the audit's nonretryable_retried counts those \
                 retried anyway.",
                e.attempts, e.provider
            )
        })
        .collect()
}

/// The primary's breaker over the night: how long it stayed open, how
/// often it let a probe through, and what the workflows it turned away cost.
fn breaker_summary(report: &crate::report::Report) -> Option<String> {
    let open: Vec<_> = report.circuits.iter().filter(|c| c.state == "open").collect();
    let first = open.first()?;
    let route = format!("{}/{}", first.provider.as_deref()?, first.model.as_deref()?);
    let seconds = |c: &&crate::report::CircuitInterval| -> Option<f64> {
        let parse = |t: &str| chrono::DateTime::parse_from_rfc3339(t).ok();
        Some((parse(c.until.as_deref()?)? - parse(&c.from)?).num_milliseconds() as f64 / 1000.0)
    };
    let open_minutes: f64 = open.iter().filter_map(seconds).sum::<f64>() / 60.0;
    let half_opens = report.circuits.iter().filter(|c| c.state == "half_open").count();
    let started: i64 = open.iter().map(|c| c.workflows_started).sum();
    let fell_back: i64 = open.iter().map(|c| c.outcomes.fallback_recovery).sum();
    let fallback_cost: f64 = open.iter().map(|c| c.fallback_cost_usd).sum();
    let at_primary: Option<f64> = open.iter().map(|c| c.primary_cost_usd).sum();
    Some(format!(
        "Breaker: {route}'s opened at {}, was open {open_minutes:.0} minutes and half-opened {half_opens} times; {started} \
         workflows started while it was open, {fell_back} fell back, their fallbacks cost ${fallback_cost:.2}{}.",
        first.from,
        at_primary.map_or(String::new(), |usd| format!(" against ${usd:.2} at the primary's price")),
    ))
}

/// What the providers' rate-limit headers said before their 429s began:
/// the warning a team had, per limit that ran out.
fn headroom_warnings(report: &crate::report::Report) -> Vec<String> {
    report
        .headroom
        .iter()
        .filter_map(|h| {
            let seconds = h.warning_seconds?;
            Some(format!(
                "Headroom: {}/{}'s {} limit fell under 10 % at {}, {:.0} minutes before its first 429 at {}; \
                 {} attempts were sent under 10 % and {} hit the limit. Alert on it: kind ratelimit_headroom, \
                 or attempt_ledger_ratelimit_headroom_ratio < 0.1.",
                h.served_provider,
                h.served_model,
                h.kind,
                h.first_below_10pct_at.as_deref().unwrap_or("?"),
                seconds / 60.0,
                h.first_429_at.as_deref().unwrap_or("?"),
                h.attempts_below_10pct,
                h.rate_limited,
            ))
        })
        .collect()
}

/// The simulated providers' usage and cost pages of the night, written
/// beside the records and imported; returns the commands that import them.
fn import_bills(store: &Store, dir: &std::path::Path, db: &str) -> anyhow::Result<Vec<String>> {
    let prices = PriceTable::load(None)?;
    let exports = crate::simulate::bill::write_exports(&store.served_by_day()?, &prices, dir)?;
    let mut commands = Vec::new();
    for (source, path) in &exports {
        let text = std::fs::read_to_string(path)?;
        let pages = attempt_core::bill::read_pages(*source, &text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        store.import_bill(&pages)?;
        commands.push(format!(
            "  attempt-ledger reconcile import --db {db} --source {} {}",
            source.name(),
            path.display()
        ));
    }
    Ok(commands)
}

/// The night held against the bills `import_bills` imported, day by day.
fn reconcile_section(reader: &Reader, imported: &[String]) -> anyhow::Result<String> {
    let Some(bounds) = reader.attempt_bounds()? else { anyhow::bail!("the demo stored no attempts") };
    let grain = attempt_core::reconcile::Grain::Day;
    let (since, until) = (grain.floor(bounds.0), grain.ceil(bounds.1 + chrono::Duration::seconds(1)));
    let window = [("since", since.to_rfc3339()), ("until", until.to_rfc3339())];
    let question = attempt_core::reconcile::Question::from_params(window.as_slice(), chrono::Utc::now())?;
    let answer = reader.reconcile(&question)?;
    Ok(format!(
        "Against the bill: the simulated providers' usage and cost pages of the night (OpenAI's and \
         Anthropic's admin exports; a project the ledger never saw, {} output billed 10 % below the price \
         table, no 429 or 529 billed), imported as\n{}\n{}",
        crate::simulate::bill::CHEAPER_OUTPUT,
        imported.join("\n"),
        crate::report::reconcile::render(&answer, Format::Table)
    ))
}

/// One line on what the night's SDK retries past the second bought, from
/// a replay of `max_retries.sdk=2`, and the command that shows the rest.
fn tune_teaser(reader: &Reader, db: &str) -> anyhow::Result<String> {
    let set = ["max_retries.sdk=2".to_string(), "no_retry_on=quota".to_string()];
    let candidate = crate::read::Candidate::from_flags(None, &set)?;
    let tune = reader.tune(&ReportFilter::default(), candidate.as_ref())?;
    let Some(replay) = tune.replay else { anyhow::bail!("a replay was asked for") };
    let total = replay.before.total.max(1) as f64;
    Ok(format!(
        "Tune: with max_retries=2 at the SDK and no retry on quota, this night keeps all but {:.2} pp of its \
         successes ({} workflows) for {} fewer attempts and ${:.2} less wasted; \
         attempt-ledger tune --db {db} --set max_retries.sdk=2 --set no_retry_on=quota",
        100.0 * replay.success_lost as f64 / total,
        replay.success_lost,
        replay.attempts.before - replay.attempts.after,
        replay.wasted_cost_usd.before - replay.wasted_cost_usd.after,
    ))
}
