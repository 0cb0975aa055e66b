//! `attempt-ledger serve`: the long-running service.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use super::{DbArg, ProvidersArg};
use crate::alerts::RuleSet;
use crate::service::{ServeConfig, serve};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: DbArg,
    #[command(flatten)]
    providers: ProvidersArg,
    /// HTTP API and OTLP/HTTP address.
    #[arg(long, default_value = "127.0.0.1:4318")]
    listen: SocketAddr,
    /// OTLP/gRPC address.
    #[arg(long, default_value = "127.0.0.1:4317")]
    otlp_grpc: SocketAddr,
    /// A price file that overrides or extends the built-in table.
    #[arg(long, env = "ATTEMPT_LEDGER_PRICES")]
    prices: Option<PathBuf>,
    /// Largest request body or gRPC message in MiB, after decompression.
    #[arg(long, default_value_t = 20)]
    max_body_mib: usize,
    /// Requests that may wait for the writer before new ones get 503.
    #[arg(long, default_value_t = 64)]
    queue: usize,
    /// Alert rule file (TOML; see examples/alerts.toml).
    #[arg(long, env = "ATTEMPT_LEDGER_RULES")]
    rules: Option<PathBuf>,
    /// How often /metrics' stored-data families are recomputed, when new
    /// data was committed ("15s", "1m").
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    metrics_refresh: std::time::Duration,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rules = args.rules.as_deref().map(RuleSet::load).transpose()?;
    let config = ServeConfig {
        db: args.db.db,
        http: args.listen,
        grpc: args.otlp_grpc,
        prices: args.prices,
        providers: args.providers.load()?,
        body_limit: args.max_body_mib << 20,
        queue: args.queue.max(1),
        max_batch: 131_072,
        rules,
        metrics_refresh: args.metrics_refresh,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(serve(config, |http, grpc| {
        // Scripts and tests read this line to find ports chosen with :0.
        println!("attempt-ledger listening: http={http} grpc={grpc}");
    }))?;
    Ok(ExitCode::SUCCESS)
}
