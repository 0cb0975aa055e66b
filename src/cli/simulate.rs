//! `attempt-ledger simulate`: realistic JSONL attempt records on stdout.

use std::io::{BufWriter, Write};
use std::process::ExitCode;

use anyhow::Context;

use crate::simulate::{Scenario, SimOptions, default_start, simulate, simulate_breaker};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long, value_enum)]
    scenario: Scenario,
    /// Workflows to simulate (default: the scenario's own).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    workflows: Option<u64>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// When the simulated traffic starts (RFC 3339).
    #[arg(long)]
    start: Option<String>,
    /// Spread the workflows over this long instead of the scenario's own
    /// hours ("30s", "10m"): replays an incident into a live service quickly.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<chrono::Duration>,
    /// After the attempts, the scenario's breaker state changes (records of
    /// `"type": "circuit"`; rate-limit-fallback has them, others none).
    #[arg(long)]
    breaker: bool,
}

fn parse_duration(text: &str) -> Result<chrono::Duration, String> {
    let std = super::flags::period(text)?;
    chrono::Duration::from_std(std).map_err(|e| e.to_string())
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let start = match args.start {
        Some(text) => chrono::DateTime::parse_from_rfc3339(&text)
            .with_context(|| format!("--start `{text}` is not RFC 3339"))?
            .with_timezone(&chrono::Utc),
        None => default_start(),
    };
    let options = SimOptions {
        scenario: args.scenario,
        workflows: args.workflows,
        seed: args.seed,
        start,
        span: args.duration,
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
    let written = simulate(&options, &mut out)
        .and_then(|_| if args.breaker { simulate_breaker(&options, &mut out).map(|_| ()) } else { Ok(()) });
    match written.and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // A closed pipe (`| head`) is the reader's choice, not a failure.
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(err) => Err(err).context("writing records"),
    }
}
