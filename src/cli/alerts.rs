//! `attempt-ledger alerts`: the alert history, or (`--check`) a replay of a
//! rule file over stored data, evaluation by evaluation, with the service's
//! own evaluator and state machine, to tune thresholds on last week's
//! traffic before they page anyone.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{DbArg, remote};
use crate::alerts::evaluate::evaluate;
use crate::alerts::history::{self, Format, events_table, new_table, text_time};
use crate::alerts::{Tracker, Transition};
use crate::read::Reader;
use crate::store::Store;
use attempt_core::alert_event::{AlertEvent, AlertState};
use attempt_core::alert_rules::RuleSet;
use attempt_core::pricing::PriceTable;
use attempt_core::time_arg::parse_time;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: DbArg,
    /// Replay the rules of `--rules` over the stored attempts instead of
    /// showing the history the service recorded.
    #[arg(long, requires = "rules")]
    check: bool,
    /// Alert rule file (TOML; see examples/alerts.toml).
    #[arg(long, env = "ATTEMPT_LEDGER_RULES")]
    rules: Option<PathBuf>,
    /// Recovery policy file for `policy_violation` rules (examples/policy.toml).
    #[arg(long, env = "ATTEMPT_LEDGER_POLICY")]
    policy: Option<PathBuf>,
    /// --check: first evaluation instant (default: the first stored attempt).
    #[arg(long)]
    since: Option<String>,
    /// --check: last evaluation instant (default: the last stored attempt
    /// plus the longest window but a cost_drift rule's, so every alert can
    /// resolve).
    #[arg(long)]
    until: Option<String>,
    /// --check: time between evaluations ("1m", "30s").
    #[arg(long, default_value = "1m", value_parser = super::flags::period)]
    step: Duration,
    /// History: how many events, newest first.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    limit: u64,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// A price file that overrides or extends the built-in table.
    #[arg(long, env = "ATTEMPT_LEDGER_PRICES")]
    prices: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // The history is the service's to tell; a replay (`--check`) needs
    // the file itself.
    let asked = || {
        let format = remote::value_name(args.format);
        remote::path_with(
            "/api/v1/alerts",
            &[("limit", Some(args.limit.to_string())), ("format", Some(format))],
        )
    };
    let store = match args.check {
        true => Store::open_for_reading(&args.db.db)?,
        false => match remote::open_or_ask(&args.db.db, &[], asked)? {
            Some(store) => store,
            None => return Ok(ExitCode::SUCCESS),
        },
    };
    // The price and policy files matter to a replay only.
    let (prices, policy) = match args.check {
        true => (args.prices.as_deref(), args.policy.as_deref()),
        false => (None, None),
    };
    let (prices, policy) = (PriceTable::load(prices)?, attempt_core::policy::LoadedPolicy::load(policy)?);
    let reader = Reader::new(store, Arc::new(prices), Arc::new(policy));
    match (&args.rules, args.check) {
        (Some(path), true) => check(&args, &reader, RuleSet::load(path)?),
        _ => history(&args, &reader),
    }
}

fn history(args: &Args, reader: &Reader) -> anyhow::Result<ExitCode> {
    let events = reader.alert_history(args.limit as usize)?;
    print!("{}", history::render(&events, args.format));
    Ok(ExitCode::SUCCESS)
}

/// What `--check` found for one rule.
#[derive(Debug, Serialize)]
struct RuleSummary {
    rule: String,
    kind: String,
    fired: usize,
    firing_seconds: i64,
    still_firing: usize,
}

#[derive(Debug, Serialize)]
struct CheckOutput {
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    step_seconds: f64,
    evaluations: usize,
    events: Vec<AlertEvent>,
    rules: Vec<RuleSummary>,
}

fn check(args: &Args, reader: &Reader, rules: RuleSet) -> anyhow::Result<ExitCode> {
    let Some((first, last)) = reader.attempt_bounds()? else {
        bail!("the database {} holds no attempts to check the rules against", args.db.db.display());
    };
    let now = Utc::now();
    let instant = |flag: &str, text: &Option<String>| {
        text.as_deref()
            .map(|t| parse_time(t, now).map_err(|e| anyhow::anyhow!("--{flag} `{t}`: {e}")))
            .transpose()
    };
    // Replayed past the last attempt by the longest window, so that every
    // alert can resolve; a bill's drift moves with imports, not with time,
    // and its windows are days: it does not lengthen the replay.
    let longest = rules
        .rules
        .iter()
        .filter(|r| r.kind != attempt_core::alert_rules::RuleKind::CostDrift)
        .map(|r| r.window)
        .max()
        .unwrap_or_default();
    let step = chrono::Duration::from_std(args.step).context("--step is too long")?;
    if step <= chrono::Duration::zero() {
        bail!("--step must be more than 0");
    }
    let since = instant("since", &args.since)?.unwrap_or(first);
    let until = instant("until", &args.until)?
        .unwrap_or_else(|| last + chrono::Duration::from_std(longest).unwrap_or_default() + step);
    let total_steps = ((until - since).num_milliseconds() / step.num_milliseconds()).max(0) as u64;
    let progress = indicatif::ProgressBar::new(total_steps);
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        progress.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }

    let mut tracker = Tracker::default();
    let mut events = Vec::new();
    let mut evaluations = 0;
    let mut t = since + step;
    while t <= until {
        let results = evaluate(reader, &rules.rules, t);
        if let Some((rule, err)) = results.iter().find_map(|r| r.outcome.as_ref().err().map(|e| (r.rule, e)))
        {
            bail!("rule {:?} failed at {}: {err}", rules.rules[rule].name, text_time(t));
        }
        for (transition, event) in tracker.observe(&rules.rules, &results, t, rules.repeat_interval) {
            if transition != Transition::Repeat {
                events.push(event);
            }
        }
        evaluations += 1;
        progress.inc(1);
        t += step;
    }
    progress.finish_and_clear();

    let still: Vec<AlertEvent> =
        tracker.active().filter(|(_, firing)| *firing).map(|(e, _)| e.clone()).collect();
    let summaries = rules
        .rules
        .iter()
        .map(|rule| {
            let mine = |e: &&AlertEvent| e.rule == rule.name;
            let firing_seconds = events
                .iter()
                .filter(mine)
                .filter(|e| e.state == AlertState::Resolved)
                .map(|e| (e.at - e.active_since).num_seconds())
                .sum::<i64>()
                + still.iter().filter(mine).map(|e| (until - e.active_since).num_seconds()).sum::<i64>();
            RuleSummary {
                rule: rule.name.clone(),
                kind: rule.kind.name().to_string(),
                fired: events.iter().filter(mine).filter(|e| e.state == AlertState::Firing).count(),
                firing_seconds,
                still_firing: still.iter().filter(mine).count(),
            }
        })
        .collect();
    let output = CheckOutput {
        since,
        until,
        step_seconds: args.step.as_secs_f64(),
        evaluations,
        events,
        rules: summaries,
    };

    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&output)?),
        Format::Table => {
            println!(
                "Replayed {} rules over {} .. {}: {} evaluations, one every {}\n",
                rules.rules.len(),
                text_time(output.since),
                text_time(output.until),
                output.evaluations,
                humantime::format_duration(args.step)
            );
            if output.events.is_empty() {
                println!("No alert would have fired.\n");
            } else {
                println!("{}\n", events_table(&output.events));
            }
            let mut t = new_table(&["rule", "kind", "fired", "time firing", "still firing at the end"]);
            for s in &output.rules {
                t.add_row(vec![
                    s.rule.clone(),
                    s.kind.clone(),
                    s.fired.to_string(),
                    humantime::format_duration(Duration::from_secs(s.firing_seconds.max(0) as u64))
                        .to_string(),
                    s.still_firing.to_string(),
                ]);
            }
            println!("{t}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
