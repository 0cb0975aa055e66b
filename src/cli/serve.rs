//! `attempt-ledger serve`: the long-running service.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use super::{DbArg, ProvidersArg};
use crate::service::auth::Tokens;
use crate::service::{ServeConfig, serve};
use attempt_core::alert_rules::RuleSet;

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
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=1024))]
    max_body_mib: u64,
    /// Write requests in flight at most (bodies being read or waiting for
    /// the writer); more get 503 before their body is read.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    queue: u64,
    /// MiB of write bodies held at once, HTTP and gRPC together (raw while
    /// they arrive, inflated until answered); a body that does not fit now
    /// gets 503 with Retry-After. At least --max-body-mib.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    queue_mib: u64,
    /// Alert rule file (TOML; see examples/alerts.toml).
    #[arg(long, env = "ATTEMPT_LEDGER_RULES")]
    rules: Option<PathBuf>,
    /// Recovery policy file (TOML; see examples/policy.toml) for the audit,
    /// its page and `policy_violation` rules. Default: the built-in rules.
    #[arg(long, env = "ATTEMPT_LEDGER_POLICY")]
    policy: Option<PathBuf>,
    /// How often /metrics' stored-data families are recomputed, when new
    /// data was committed ("15s", "1m").
    #[arg(long, default_value = "15s", value_parser = super::flags::period)]
    metrics_refresh: std::time::Duration,
    /// Open connections at most on each port (HTTP, gRPC); more wait to be
    /// accepted. Default 1024, or what the open-files limit allows.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    max_connections: Option<u64>,
    /// How long a request's headers may take to arrive, from the
    /// connection's first byte or the previous response ("10s").
    #[arg(long, default_value = "10s", value_parser = super::flags::deadline)]
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
    #[arg(long, default_value = "30s", value_parser = super::flags::deadline)]
    body_timeout: std::time::Duration,
    /// PEM certificate chain: serve HTTPS and gRPC over TLS with it (and
    /// --tls-key). Clients need the chain's CA; plain-text requests fail.
    #[arg(long, value_name = "PEM", env = "ATTEMPT_LEDGER_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "PEM", env = "ATTEMPT_LEDGER_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Export to the attempt lake continuously (created when missing; see
    /// docs/lake.md): a folder, or an object store's URL
    /// (s3://BUCKET/PREFIX, gs://, az://).
    #[arg(long, value_name = "LAKE", env = "ATTEMPT_LEDGER_LAKE", value_parser = crate::lake::storage::Location::parse)]
    lake: Option<crate::lake::storage::Location>,
    /// Export to the lake once attempts have waited this long ("5m").
    #[arg(long, default_value = "5m", value_parser = super::flags::lake_interval, requires = "lake")]
    lake_interval: std::time::Duration,
    /// ... or as soon as the waiting attempts would take this many MiB in
    /// the lake.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u64).range(1..=65_536), requires = "lake")]
    lake_max_mib: u64,
    #[command(flatten)]
    node: super::export::LakeArgs,
    /// Fetch the providers' bills this often ("1h") and import them, for
    /// each provider whose key is set (OPENAI_ADMIN_KEY, ANTHROPIC_ADMIN_KEY,
    /// OPENROUTER_API_KEY; docs/reconcile.md).
    #[arg(long, value_parser = super::flags::reconcile_every)]
    reconcile_every: Option<std::time::Duration>,
    /// How far back each run re-reads ("1d"), so usage the provider
    /// reports late replaces what an earlier run read.
    #[arg(long, default_value = "1d", value_parser = super::flags::look_back, requires = "reconcile_every")]
    reconcile_look_back: std::time::Duration,
    /// PROVIDER=URL: another address for a provider's admin API (a proxy).
    #[arg(long, value_name = "PROVIDER=URL", requires = "reconcile_every")]
    reconcile_base_url: Vec<String>,
}

/// The flags of `serve` alone, as [`InProcess::start`] reads them.
#[derive(clap::Parser)]
#[command(name = "serve")]
struct ServeFlags {
    #[command(flatten)]
    args: Args,
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

/// `--reconcile-every` with the providers whose keys are set; refused when
/// none is, or when a base URL names no provider.
fn reconcile_config(
    every: Option<std::time::Duration>,
    look_back: std::time::Duration,
    base_urls: &[String],
) -> anyhow::Result<Option<crate::service::reconciler::ReconcileConfig>> {
    use crate::admin_api::{Key, Provider};
    let Some(every) = every else { return Ok(None) };
    let mut urls = std::collections::HashMap::new();
    for pair in base_urls {
        let (name, url) = pair
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--reconcile-base-url: `{pair}` is not PROVIDER=URL"))?;
        let provider = <Provider as clap::ValueEnum>::from_str(name, true).map_err(|_| {
            anyhow::anyhow!("--reconcile-base-url: `{name}` is not openai, anthropic or openrouter")
        })?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            anyhow::bail!("--reconcile-base-url: `{url}` is not an http:// or https:// address");
        }
        urls.insert(provider, url.to_string());
    }
    let sources: Vec<_> = [Provider::Openai, Provider::Anthropic, Provider::Openrouter]
        .into_iter()
        .filter_map(|provider| {
            let key = Key::from_env(provider).ok()?;
            let base_url =
                urls.get(&provider).cloned().unwrap_or_else(|| provider.default_base_url().to_string());
            Some(crate::service::reconciler::Source { provider, key, base_url })
        })
        .collect();
    if sources.is_empty() {
        anyhow::bail!(
            "--reconcile-every: no provider's key is set (OPENAI_ADMIN_KEY, ANTHROPIC_ADMIN_KEY or OPENROUTER_API_KEY)"
        );
    }
    Ok(Some(crate::service::reconciler::ReconcileConfig { every, look_back, sources }))
}

/// File descriptors `serve` needs besides its connections: the database
/// and its log, the listeners, the runtime's own, DuckDB's spill files.
const RESERVED_DESCRIPTORS: u64 = 64;

/// The default of `--max-connections`.
const DEFAULT_MAX_CONNECTIONS: u64 = 1024;

/// Both ports may hold the cap each: the soft limit on open files is raised
/// to cover them (up to the hard limit). Past what the hard limit allows,
/// a cap the user asked for is refused at start, rather than met as EMFILE
/// under load with both ports stalled; the default is lowered to fit.
fn connection_cap(asked: Option<u64>) -> anyhow::Result<u64> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let max_connections = asked.unwrap_or(DEFAULT_MAX_CONNECTIONS);
    let need = 2 * max_connections + RESERVED_DESCRIPTORS;
    let limit = getrlimit(Resource::Nofile);
    let soft = limit.current.unwrap_or(u64::MAX);
    if soft >= need {
        return Ok(max_connections);
    }
    let hard = limit.maximum.unwrap_or(u64::MAX);
    let raised = Rlimit { current: Some(need.min(hard)), maximum: limit.maximum };
    if setrlimit(Resource::Nofile, raised).is_ok() && need <= hard {
        return Ok(max_connections);
    }
    let fits = (need.min(hard).max(soft).saturating_sub(RESERVED_DESCRIPTORS) / 2).max(1);
    if asked.is_none() {
        tracing::warn!(
            max_connections = fits,
            open_files = need.min(hard).max(soft),
            "the open-files limit allows {fits} connections per port, not {DEFAULT_MAX_CONNECTIONS}"
        );
        return Ok(fits);
    }
    anyhow::bail!(
        "--max-connections {max_connections} needs {need} open files (that many connections on each of \
         the HTTP and gRPC ports, plus {RESERVED_DESCRIPTORS}), but this process may open {soft} (hard \
         limit {hard}): lower --max-connections, or raise the limit (systemd: LimitNOFILE=; a shell: \
         ulimit -n)"
    )
}

pub fn run(args: Box<Args>) -> anyhow::Result<ExitCode> {
    let config = config_of(*args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(serve_recorded(config, crate::service::wait_for_signal(), |http, grpc| {
        // Scripts and tests read this line to find ports chosen with :0.
        println!("attempt-ledger listening: http={http} grpc={grpc}");
    }))?;
    Ok(ExitCode::SUCCESS)
}

/// The flags, range-checked together and loaded (rules, policy, tokens,
/// certificates), as the service's configuration.
fn config_of(args: Args) -> anyhow::Result<ServeConfig> {
    if args.queue_mib < args.max_body_mib {
        anyhow::bail!(
            "--queue-mib {} is below --max-body-mib {}: a body of the largest size could never be taken",
            args.queue_mib,
            args.max_body_mib
        );
    }
    // From the environment it may be meant for `export`; on the command
    // line, without --lake, it would be ignored.
    if args.lake.is_none()
        && args.node.node_id.is_some()
        && std::env::var_os(super::export::NODE_ID_ENV).is_none()
    {
        anyhow::bail!("--node-id names this database in a lake: it needs --lake LAKE");
    }
    let table_config = if args.lake.is_some() { args.node.table_config()? } else { None };
    let max_connections = connection_cap(args.max_connections)?;
    let rules = args.rules.as_deref().map(RuleSet::load).transpose()?;
    let config = ServeConfig {
        db: args.db.db,
        http: args.listen,
        grpc: args.otlp_grpc,
        prices: args.prices,
        providers: args.providers.load()?,
        // In range (checked by clap), so these neither wrap nor are 0.
        body_limit: (args.max_body_mib as usize) << 20,
        queue: args.queue as usize,
        queue_bytes: (args.queue_mib as usize) << 20,
        max_batch: 131_072,
        rules,
        policy: attempt_core::policy::LoadedPolicy::load(args.policy.as_deref())?,
        metrics_refresh: args.metrics_refresh,
        body_timeout: args.body_timeout,
        tokens: load_tokens(args.tokens.as_deref())?,
        open_beyond_loopback: args.open_beyond_loopback,
        tls: match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles::load(cert, key)?),
            _ => None,
        },
        http_limits: crate::service::listen::HttpLimits {
            max_connections: max_connections as usize,
            header_timeout: args.header_timeout,
        },
        reconcile: reconcile_config(
            args.reconcile_every,
            args.reconcile_look_back,
            &args.reconcile_base_url,
        )?,
        lake: args.lake.map(|location| crate::service::LakeConfig {
            location,
            table: table_config,
            node_id: args.node.node_id,
            buckets: args.node.lake_buckets,
            replace_node: args.node.replace_node,
            interval: args.lake_interval,
            max_bytes: args.lake_max_mib << 20,
        }),
    };
    Ok(config)
}

/// `serve` until `stop`, its address recorded beside the database while it
/// answers: the read commands ask it there (`remote.rs`).
async fn serve_recorded(
    config: ServeConfig,
    stop: impl Future<Output = ()> + Send + 'static,
    ready: impl FnOnce(SocketAddr, SocketAddr),
) -> anyhow::Result<()> {
    let (db, tls) = (config.db.clone(), config.tls.is_some());
    let mut recorded = None;
    let served = serve(
        config,
        |http, grpc| {
            match super::remote::record(&db, http, tls) {
                Ok(file) => recorded = Some(file),
                Err(err) => tracing::warn!(error = %err, "the read commands will not find this service"),
            }
            ready(http, grpc);
        },
        stop,
    )
    .await;
    drop(recorded);
    served
}

/// `serve` on a thread of this process, started from the same flags as the
/// command and stopped by [`InProcess::stop`] (or when dropped) as SIGTERM
/// stops the command: for embedding the service, and for tests of its
/// handlers that need no process of their own. The telemetry counters of
/// /metrics are the process's, shared by every service it runs.
pub struct InProcess {
    pub http: SocketAddr,
    pub grpc: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
}

impl InProcess {
    /// Starts `serve` with `flags` (those of the command, without `serve`)
    /// and returns once it listens, or with the error that stopped it.
    pub fn start<I, T>(flags: I) -> anyhow::Result<InProcess>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let argv = std::iter::once("serve".into()).chain(flags.into_iter().map(Into::into));
        let config = config_of(<ServeFlags as clap::Parser>::try_parse_from(argv)?.args)?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready, listening) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new().name("serve".into()).spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let stop = async {
                let _ = stopped.await;
            };
            runtime.block_on(serve_recorded(config, stop, |http, grpc| {
                let _ = ready.send((http, grpc));
            }))
        })?;
        match listening.recv() {
            Ok((http, grpc)) => Ok(InProcess { http, grpc, stop: Some(stop), thread: Some(thread) }),
            Err(_) => {
                Err(join(thread).err().unwrap_or_else(|| anyhow::anyhow!("serve ended before it listened")))
            }
        }
    }

    /// Stops as SIGTERM stops the command, and returns how it ended.
    pub fn stop(mut self) -> anyhow::Result<()> {
        self.stop.take().map(|stop| stop.send(()));
        self.thread.take().map_or(Ok(()), join)
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.stop.take().map(|stop| stop.send(()));
        if let Some(thread) = self.thread.take() {
            let _ = join(thread);
        }
    }
}

fn join(thread: std::thread::JoinHandle<anyhow::Result<()>>) -> anyhow::Result<()> {
    thread.join().map_err(|_| anyhow::anyhow!("serve panicked"))?
}
