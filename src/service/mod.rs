//! `attempt-ledger serve`: HTTP API, OTLP/HTTP and OTLP/gRPC receivers, and
//! reports, over one DuckDB database.
//!
//! One writer thread owns the write connection (`writer.rs`); handlers hand
//! it batches and answer only after the commit. Reports run on their own
//! read connections; the metrics refresher and the alert evaluator run on
//! their own threads (`observer.rs`).
//!
//! Shutdown, in order: (1) a signal stops both listeners from accepting;
//! (2) requests in flight finish, including their wait for the writer;
//! (3) the last writer handle is dropped, the writer commits what is queued
//! and stops; (4) the background loops stop (an evaluation in progress
//! finishes); (5) the process exits. Notifications still queued for a
//! receiver are not waited for: the alert history has them.

pub mod body;
pub mod grpc;
pub mod health;
pub mod http;
pub mod observer;
pub mod writer;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::alerts::RuleSet;
use crate::pricing::PriceTable;
use crate::store::Store;

/// Requests and records by receiver, for the metrics endpoint; the writer
/// keeps its own (`writer::WriterStats`).
#[derive(Debug, Default)]
pub struct ServiceStats {
    pub attempts_requests: AtomicU64,
    pub otlp_http_requests: AtomicU64,
    pub otlp_grpc_requests: AtomicU64,
    /// Records (lines or spans) rejected by validation.
    pub rejected_records: AtomicU64,
}

impl ServiceStats {
    pub fn count(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub db: PathBuf,
    pub http: SocketAddr,
    pub grpc: SocketAddr,
    pub prices: Option<PathBuf>,
    /// Provider alias table applied to what is written.
    pub providers: crate::providers::ProviderAliases,
    /// Largest request body or gRPC message, after decompression.
    pub body_limit: usize,
    /// Requests that may wait for the writer before new ones are refused.
    pub queue: usize,
    /// Attempts committed together at most.
    pub max_batch: usize,
    /// Alert rules to evaluate; none: no evaluator runs.
    pub rules: Option<RuleSet>,
    /// How often the stored-data metrics are recomputed (when data changed).
    pub metrics_refresh: Duration,
}

/// Runs until SIGINT or SIGTERM. `ready` is told the bound addresses.
pub async fn serve(config: ServeConfig, ready: impl FnOnce(SocketAddr, SocketAddr)) -> anyhow::Result<()> {
    let store = Store::open(&config.db)?.with_aliases(config.providers.clone());
    // Before listening: the first request must not wait for a scan of
    // every stored id.
    store.load_known_ids()?;
    let reader = store.try_clone()?;
    let prices = Arc::new(PriceTable::load(config.prices.as_deref())?);
    let metrics_store = store.try_clone()?;
    let alerts_store = store.try_clone()?;
    let (writer, writer_thread) = writer::spawn(store, config.queue, config.max_batch);
    let observed = Arc::new(observer::Observed::default());
    let stop_loops = Arc::new(observer::Stop::default());
    let mut loops = vec![observer::spawn_metrics_refresher(
        metrics_store,
        prices.clone(),
        writer.stats.clone(),
        config.metrics_refresh,
        observed.clone(),
        stop_loops.clone(),
    )?];
    if let Some(rules) = config.rules.clone() {
        loops.push(observer::spawn_alert_evaluator(
            alerts_store,
            prices.clone(),
            rules,
            observed.clone(),
            stop_loops.clone(),
        )?);
    }

    let http_listener =
        TcpListener::bind(config.http).await.with_context(|| format!("cannot listen on {}", config.http))?;
    let grpc_listener =
        TcpListener::bind(config.grpc).await.with_context(|| format!("cannot listen on {}", config.grpc))?;
    ready(http_listener.local_addr()?, grpc_listener.local_addr()?);

    let (stop, stopped) = watch::channel(false);
    let signal_task = tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down: no new requests, finishing those in flight");
        let _ = stop.send(true);
    });
    let until_stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };

    let stats = Arc::new(ServiceStats::default());
    let state = http::AppState {
        stats: stats.clone(),
        writer: writer.clone(),
        reader: Arc::new(Mutex::new(reader)),
        prices,
        body_limit: config.body_limit,
        observed,
    };
    let http_server =
        axum::serve(http_listener, http::app(state)).with_graceful_shutdown(until_stopped(stopped.clone()));
    let grpc_server = tonic::transport::Server::builder()
        .add_service(grpc::service(writer.clone(), stats, config.body_limit))
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(grpc_listener),
            until_stopped(stopped.clone()),
        );
    let (http_result, grpc_result) = tokio::join!(http_server, grpc_server);
    signal_task.abort();
    drop(writer);
    tokio::task::spawn_blocking(move || writer_thread.join())
        .await?
        .map_err(|_| anyhow::anyhow!("the writer thread panicked"))?;
    stop_loops.stop();
    for handle in loops {
        tokio::task::spawn_blocking(move || handle.join())
            .await?
            .map_err(|_| anyhow::anyhow!("a background loop panicked"))?;
    }
    http_result.context("HTTP server")?;
    grpc_result.context("gRPC server")?;
    Ok(())
}

async fn wait_for_signal() {
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
