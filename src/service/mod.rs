//! `attempt-ledger serve`: HTTP API, OTLP/HTTP and OTLP/gRPC receivers, and
//! reports, over one DuckDB database.
//!
//! One writer thread owns the write connection (`writer.rs`); handlers hand
//! it batches and answer only after the commit. The deriver thread derives
//! what the writes touched on its own connection (`deriver.rs`); reads wait
//! for it (boundedly) to reach what was acknowledged before they asked.
//! Reports run on their own read connections; the metrics refresher and the
//! alert evaluator run on their own threads (`observer.rs`).
//!
//! Shutdown, in order: (1) a signal stops both listeners from accepting;
//! (2) requests in flight finish, including their wait for the writer, for
//! `SHUTDOWN_GRACE` at most (a client that stalls mid-request is cut off:
//! nothing of it was acknowledged); (3) the last writer handle is dropped, the writer commits what is queued
//! and stops; (4) the deriver finishes its round and stops (what is still
//! pending is derived at the next open); (5) the background loops stop (an
//! evaluation in progress finishes); (6) the process exits. Notifications still queued for a
//! receiver are not waited for: the alert history has them.

pub mod auth;
pub mod body;
pub mod budget;
pub mod deriver;
pub mod error;
pub mod grpc;
pub mod grpc_listen;
pub mod health;
pub mod http;
pub mod lake;
pub mod listen;
pub mod observer;
pub mod otlp_receiver;
pub mod pages;
pub mod readers;
pub mod recent_traces;
pub mod reconciler;
pub mod session;
pub mod state;
pub mod tls;
pub mod traced;
pub mod writer;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::store::{Job, MemoryLimit, Store};
use attempt_core::alert_rules::RuleSet;
use attempt_core::pricing::PriceTable;

#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub db: PathBuf,
    pub http: SocketAddr,
    pub grpc: SocketAddr,
    pub prices: Option<PathBuf>,
    /// Provider alias table applied to what is written.
    pub providers: attempt_core::providers::ProviderAliases,
    /// Largest request body or gRPC message, after decompression.
    pub body_limit: usize,
    /// Write requests in flight (body read, waiting for the writer) before
    /// new ones are refused; with `body_limit`, bounds the bodies in memory.
    pub queue: usize,
    /// Bytes of write bodies held at once (raw while read, then inflated),
    /// HTTP and gRPC together; at least `body_limit`.
    pub queue_bytes: usize,
    /// Attempts committed together at most.
    pub max_batch: usize,
    /// Alert rules to evaluate; none: no evaluator runs.
    pub rules: Option<RuleSet>,
    /// The recovery policy of the audit and `policy_violation` rules.
    pub policy: attempt_core::policy::LoadedPolicy,
    /// How often the stored-data metrics are recomputed (when data changed).
    pub metrics_refresh: Duration,
    /// Open HTTP connections and the time a request's headers may take.
    pub http_limits: listen::HttpLimits,
    /// The time a write request's body may take.
    pub body_timeout: Duration,
    /// Bearer tokens; none: open access, on loopback only unless
    /// `open_beyond_loopback`.
    pub tokens: auth::Tokens,
    pub open_beyond_loopback: bool,
    /// Certificate and key for both listeners; none: plain text.
    pub tls: Option<tls::TlsFiles>,
    /// The attempt lake to export to; none: no export.
    pub lake: Option<LakeConfig>,
    /// The providers' bills to fetch on a schedule; none: no fetching.
    pub reconcile: Option<reconciler::ReconcileConfig>,
}

/// `--lake` and the flags that go with it.
#[derive(Debug, Clone)]
pub struct LakeConfig {
    pub location: crate::lake::storage::Location,
    /// `--table-format iceberg`: the table each export commits to.
    pub table: Option<crate::lake::iceberg::TableConfig>,
    /// `--node-id`; none: the stored one, or a new one.
    pub node_id: Option<String>,
    /// Buckets of a new lake; none: 16 (or the existing lake's).
    pub buckets: Option<u32>,
    /// `--replace-node`: take the node id over from the database the lake
    /// binds it to.
    pub replace_node: bool,
    pub interval: Duration,
    pub max_bytes: u64,
}

/// The longest a gRPC call may take, from its headers to its answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Concurrent streams (calls) on one gRPC connection; more wait for one to
/// end (HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`).
pub const GRPC_MAX_STREAMS: u32 = 100;

/// The headers of one gRPC call, in bytes (HTTP/2
/// `SETTINGS_MAX_HEADER_LIST_SIZE`).
pub const GRPC_MAX_HEADER_BYTES: u32 = 64 << 10;

/// A gRPC connection silent this long (no call, no byte either way) is
/// closed: longer than any call may take, so only idle ones go, and an
/// exporter reconnects at its next export.
pub const GRPC_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// How long shutdown waits for requests in flight before it closes their
/// connections.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Runs until `stop` completes (the command waits for SIGINT or SIGTERM:
/// [`wait_for_signal`]). `ready` is told the bound addresses.
///
/// Start, in order: (1) refuse open access beyond loopback; (2) open the
/// store, deriving what an earlier process left pending, with its ids
/// loaded (the first request must not wait for a scan of every stored id);
/// (3) the deriver and the writer threads; (4) the background loops (the
/// metrics refresher, the alert evaluator, the lake's exporter once its
/// node id is bound: one another database holds refuses the start); (5)
/// the listeners, then `ready`. Stop: the module's list, (1) to (6).
pub async fn serve(
    config: ServeConfig,
    ready: impl FnOnce(SocketAddr, SocketAddr),
    stop: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // Start (1).
    refuse_open_access_beyond_loopback(&config)?;
    // Start (2).
    let limit = MemoryLimit::for_job(Job::Serve);
    tracing::info!(db = %config.db.display(), "{limit}");
    let store = Store::open_for_job(&config.db, &limit)?.with_aliases(config.providers.clone());
    store.load_known_ids()?;
    let reader = store.try_clone()?;
    let prices = Arc::new(PriceTable::load(config.prices.as_deref())?);
    let policy = Arc::new(config.policy.clone());
    // Start (3).
    let (workers, writer) = Workers::start(store, &config)?;
    // Start (4).
    let observed = Arc::new(observer::Observed::default());
    let loops = Loops::start(&reader, &config, &workers.derivation, &prices, &policy, &observed)?;
    // Start (5).
    let http_listener =
        TcpListener::bind(config.http).await.with_context(|| format!("cannot listen on {}", config.http))?;
    let grpc_listener =
        TcpListener::bind(config.grpc).await.with_context(|| format!("cannot listen on {}", config.grpc))?;
    ready(http_listener.local_addr()?, grpc_listener.local_addr()?);
    let state = state::AppState {
        writer: writer.clone(),
        readers: readers::Readers::new(reader),
        prices,
        body_limit: config.body_limit,
        write_slots: Arc::new(tokio::sync::Semaphore::new(config.queue.max(1))),
        byte_budget: budget::ByteBudget::new(config.queue_bytes.max(config.body_limit)),
        recent_call_traces: Arc::default(),
        body_timeout: config.body_timeout,
        local_hosts_only: !config.tokens.enabled() && config.http.ip().is_loopback(),
        tokens: Arc::new(config.tokens.clone()),
        observed,
        sessions: Arc::new(session::Sessions::default()),
        tls: config.tls.is_some(),
        policy,
        derivation: workers.derivation.clone(),
    };
    // Stop (1) and (2).
    let grpc_result = serve_until_stopped(&config, http_listener, grpc_listener, state, stop).await;
    // Stop (3) and (4).
    workers.stop(writer).await?;
    // Stop (5).
    loops.stop().await?;
    grpc_result.context("gRPC server")
}

fn refuse_open_access_beyond_loopback(config: &ServeConfig) -> anyhow::Result<()> {
    let loopback = config.http.ip().is_loopback() && config.grpc.ip().is_loopback();
    if !config.tokens.enabled() && !loopback && !config.open_beyond_loopback {
        anyhow::bail!(
            "refusing to listen beyond loopback ({} and {}) without access tokens: anyone who can reach \
             the port could write and read the ledger. Pass --tokens FILE (lines `ingest TOKEN`, \
             `read TOKEN`), or --open-beyond-loopback if something in front authenticates",
            config.http,
            config.grpc
        );
    }
    Ok(())
}

/// The writer thread, which owns the write connection, and the deriver
/// thread, which derives on its own what the writes touched.
struct Workers {
    derivation: Arc<deriver::Derivation>,
    stop_deriver: Arc<deriver::Stop>,
    deriver_thread: std::thread::JoinHandle<()>,
    writer_thread: std::thread::JoinHandle<()>,
}

impl Workers {
    fn start(store: Store, config: &ServeConfig) -> anyhow::Result<(Workers, writer::WriterHandle)> {
        let derivation =
            Arc::new(deriver::Derivation::new(store.pending()?.derived_through, store.quarantined_count()?));
        let stop_deriver = Arc::new(deriver::Stop::default());
        let deriver_thread = deriver::spawn(store.try_clone()?, derivation.clone(), stop_deriver.clone())?;
        let (writer, writer_thread) =
            writer::spawn(store, config.queue, config.max_batch, derivation.clone());
        Ok((Workers { derivation, stop_deriver, deriver_thread, writer_thread }, writer))
    }

    /// Stop (3): with the last handle dropped, the writer commits what is
    /// queued and stops; (4): the deriver finishes its round (what is still
    /// pending is derived when the database is next opened).
    async fn stop(self, last_writer: writer::WriterHandle) -> anyhow::Result<()> {
        drop(last_writer);
        let writer_thread = self.writer_thread;
        tokio::task::spawn_blocking(move || writer_thread.join())
            .await?
            .map_err(|_| anyhow::anyhow!("the writer thread panicked"))?;
        self.stop_deriver.stop(&self.derivation);
        let deriver_thread = self.deriver_thread;
        tokio::task::spawn_blocking(move || deriver_thread.join())
            .await?
            .map_err(|_| anyhow::anyhow!("the deriver thread panicked"))
    }
}

/// The background loops, each on its own thread and connection.
struct Loops {
    stop: Arc<observer::Stop>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Loops {
    fn start(
        reader: &Store,
        config: &ServeConfig,
        derivation: &Arc<deriver::Derivation>,
        prices: &Arc<PriceTable>,
        policy: &Arc<attempt_core::policy::LoadedPolicy>,
        observed: &Arc<observer::Observed>,
    ) -> anyhow::Result<Loops> {
        let stop = Arc::new(observer::Stop::default());
        let mut threads = vec![observer::spawn_metrics_refresher(
            crate::read::Reader::new(reader.try_clone()?, prices.clone(), policy.clone()),
            derivation.clone(),
            config.metrics_refresh,
            observed.clone(),
            stop.clone(),
        )?];
        if let Some(rules) = config.rules.clone() {
            // Its own connection to record the transitions it reads.
            threads.push(observer::spawn_alert_evaluator(
                crate::read::Reader::new(reader.try_clone()?, prices.clone(), policy.clone()),
                reader.try_clone()?,
                rules,
                observed.clone(),
                stop.clone(),
            )?);
        }
        if let Some(lake) = &config.lake {
            threads.push(start_lake_exporter(reader.try_clone()?, lake, prices)?.spawn(stop.clone())?);
        }
        if let Some(reconcile) = &config.reconcile {
            let reconciler = reconciler::Reconciler {
                store: reader.try_clone()?,
                reader: crate::read::Reader::new(reader.try_clone()?, prices.clone(), policy.clone()),
                config: reconcile.clone(),
            };
            threads.push(reconciler.spawn(stop.clone())?);
        }
        Ok(Loops { stop, threads })
    }

    /// Stop (5): an evaluation or export in progress finishes.
    async fn stop(self) -> anyhow::Result<()> {
        self.stop.stop();
        for thread in self.threads {
            tokio::task::spawn_blocking(move || thread.join())
                .await?
                .map_err(|_| anyhow::anyhow!("a background loop panicked"))?;
        }
        Ok(())
    }
}

/// The lake's exporter, its node id bound before the listeners open: a
/// node id another database holds refuses the start, with what to do.
fn start_lake_exporter(
    store: Store,
    lake: &LakeConfig,
    prices: &Arc<PriceTable>,
) -> anyhow::Result<lake::LakeExporter> {
    let node = store.node_id(lake.node_id.as_deref())?;
    let (opened, binding) = crate::lake::export::open_bound(
        &store,
        &lake.location,
        lake.buckets,
        &node,
        lake.replace_node,
        lake.table.as_ref(),
    )?;
    if let Some(old) = &binding.replaced {
        tracing::warn!(node = %node, replaced = %old.database_id, "took the node id over from another database");
    }
    tracing::info!(lake = %lake.location, node = %node, lake_id = %opened.manifest().lake_id, "exporting to the lake");
    Ok(lake::LakeExporter {
        store,
        lake: opened,
        binding,
        prices: prices.clone(),
        interval: lake.interval,
        max_bytes: lake.max_bytes,
    })
}

/// Serves both listeners until `stop`. Stop (1): no new connections;
/// (2): requests in flight finish within `SHUTDOWN_GRACE`, then their
/// connections are dropped (what the writer has queued is still committed
/// after). Returns the gRPC server's own end.
async fn serve_until_stopped(
    config: &ServeConfig,
    http_listener: TcpListener,
    grpc_listener: TcpListener,
    state: state::AppState,
    stop: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (stopping, stopped) = watch::channel(false);
    let stop_task = tokio::spawn(async move {
        stop.await;
        tracing::info!("shutting down: no new requests, finishing those in flight");
        let _ = stopping.send(true);
    });
    let until_stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let grpc_traces = grpc::service::<otlp_receiver::Traces>(
        state.writer.clone(),
        state.tokens.clone(),
        config.body_limit,
        state.byte_budget.clone(),
        state.recent_call_traces.clone(),
    );
    let grpc_logs = grpc::service::<otlp_receiver::Logs>(
        state.writer.clone(),
        state.tokens.clone(),
        config.body_limit,
        state.byte_budget.clone(),
        state.recent_call_traces.clone(),
    );
    let grpc_metrics = grpc::service::<otlp_receiver::Metrics>(
        state.writer.clone(),
        state.tokens.clone(),
        config.body_limit,
        state.byte_budget.clone(),
        state.recent_call_traces.clone(),
    );
    let http_server = listen::serve_http(
        http_listener,
        http::app(state),
        config.http_limits,
        config.tls.as_ref().map(tls::TlsFiles::http_acceptor),
        until_stopped(stopped.clone()),
    );
    let mut grpc_builder = tonic::transport::Server::builder();
    if let Some(files) = &config.tls {
        grpc_builder = grpc_builder.tls_config(files.grpc_config()).context("gRPC TLS")?;
    }
    let grpc_limits = grpc_listen::GrpcLimits {
        max_connections: config.http_limits.max_connections,
        first_byte_timeout: config.http_limits.header_timeout,
        idle_timeout: GRPC_IDLE_TIMEOUT,
    };
    let grpc_server = grpc_builder
        .timeout(REQUEST_TIMEOUT)
        // hyper's own default, which tonic replaces with "no limit".
        .max_concurrent_streams(GRPC_MAX_STREAMS)
        .http2_max_header_list_size(GRPC_MAX_HEADER_BYTES)
        .add_service(grpc_traces)
        .add_service(grpc_logs)
        .add_service(grpc_metrics)
        .serve_with_incoming_shutdown(
            grpc_listen::incoming(grpc_listener, grpc_limits),
            until_stopped(stopped.clone()),
        );
    let servers = async { tokio::join!(http_server, grpc_server).1 };
    let grace = async {
        until_stopped(stopped.clone()).await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    let result = tokio::select! {
        result = servers => result.map_err(anyhow::Error::from),
        _ = grace => {
            tracing::warn!(grace_s = SHUTDOWN_GRACE.as_secs(), "requests still in flight: closing their connections");
            Ok(())
        }
    };
    stop_task.abort();
    result
}

/// SIGINT or SIGTERM (SIGINT alone where there are no Unix signals).
pub async fn wait_for_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(_) => {
                let _ = interrupt.await;
                return;
            }
        };
        tokio::select! {
            _ = interrupt => {},
            _ = terminate.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
