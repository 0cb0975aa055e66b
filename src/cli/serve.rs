//! `attempt-ledger serve`: the long-running service.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use super::{DbArg, ProvidersArg};
use crate::alerts::RuleSet;
use crate::service::auth::Tokens;
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
    /// Write requests in flight at most (bodies being read or waiting for
    /// the writer); more get 503 before their body is read.
    #[arg(long, default_value_t = 64)]
    queue: usize,
    /// MiB of write bodies held at once, HTTP and gRPC together (raw while
    /// they arrive, inflated until answered); a body that does not fit now
    /// gets 503 with Retry-After. At least --max-body-mib.
    #[arg(long, default_value_t = 256)]
    queue_mib: usize,
    /// Alert rule file (TOML; see examples/alerts.toml).
    #[arg(long, env = "ATTEMPT_LEDGER_RULES")]
    rules: Option<PathBuf>,
    /// Recovery policy file (TOML; see examples/policy.toml) for the audit,
    /// its page and `policy_violation` rules. Default: the built-in rules.
    #[arg(long, env = "ATTEMPT_LEDGER_POLICY")]
    policy: Option<PathBuf>,
    /// How often /metrics' stored-data families are recomputed, when new
    /// data was committed ("15s", "1m").
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    metrics_refresh: std::time::Duration,
    /// Open HTTP connections at most; more wait to be accepted.
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
    /// How long a request's headers may take to arrive, from the
    /// connection's first byte or the previous response ("10s").
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    header_timeout: std::time::Duration,
    /// Access tokens: a file of lines `ingest TOKEN` (may write) and `read
    /// TOKEN` (may read reports, alerts, /metrics). With tokens, every route
    /// but /healthz and /readyz needs `Authorization: Bearer TOKEN`.
    #[arg(long, value_name = "FILE")]
    tokens: Option<PathBuf>,
    /// Listen beyond loopback without tokens (only behind something that
    /// authenticates).
    #[arg(long)]
    open_beyond_loopback: bool,
    /// How long a write request's body may take to arrive ("30s"); 408 after.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    body_timeout: std::time::Duration,
    /// PEM certificate chain: serve HTTPS and gRPC over TLS with it (and
    /// --tls-key). Clients need the chain's CA; plain-text requests fail.
    #[arg(long, value_name = "PEM", env = "ATTEMPT_LEDGER_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "PEM", env = "ATTEMPT_LEDGER_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

/// Tokens from `--tokens FILE`, else from `ATTEMPT_LEDGER_TOKENS` (the same
/// lines; `;` also separates them), else none.
fn load_tokens(file: Option<&std::path::Path>) -> anyhow::Result<Tokens> {
    if let Some(path) = file {
        return Ok(Tokens::load(path)?);
    }
    match std::env::var(TOKENS_ENV) {
        Ok(text) => Tokens::parse(&text.replace(';', "\n")).map_err(|e| anyhow::anyhow!("{TOKENS_ENV}: {e}")),
        Err(_) => Ok(Tokens::default()),
    }
}

const TOKENS_ENV: &str = "ATTEMPT_LEDGER_TOKENS";

use crate::service::tls::TlsFiles;

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.queue_mib < args.max_body_mib {
        anyhow::bail!(
            "--queue-mib {} is below --max-body-mib {}: a body of the largest size could never be taken",
            args.queue_mib,
            args.max_body_mib
        );
    }
    let rules = args.rules.as_deref().map(RuleSet::load).transpose()?;
    let config = ServeConfig {
        db: args.db.db,
        http: args.listen,
        grpc: args.otlp_grpc,
        prices: args.prices,
        providers: args.providers.load()?,
        body_limit: args.max_body_mib << 20,
        queue: args.queue.max(1),
        queue_bytes: args.queue_mib << 20,
        max_batch: 131_072,
        rules,
        policy: crate::report::audit::LoadedPolicy::load(args.policy.as_deref())?,
        metrics_refresh: args.metrics_refresh,
        body_timeout: args.body_timeout,
        tokens: load_tokens(args.tokens.as_deref())?,
        open_beyond_loopback: args.open_beyond_loopback,
        tls: match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles::load(cert, key)?),
            _ => None,
        },
        http_limits: crate::service::listen::HttpLimits {
            max_connections: args.max_connections,
            header_timeout: args.header_timeout,
        },
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(serve(config, |http, grpc| {
        // Scripts and tests read this line to find ports chosen with :0.
        println!("attempt-ledger listening: http={http} grpc={grpc}");
    }))?;
    Ok(ExitCode::SUCCESS)
}
