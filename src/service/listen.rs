//! The HTTP accept loop, with the bounds `axum::serve` does not set: at
//! most `max_connections` open at once (past it, new connections wait in
//! the kernel's backlog), and a deadline for a request's headers, so a
//! client that opens a connection and sends nothing, or one byte a minute,
//! holds a slot for `header_timeout` at most. Shutdown stops accepting and
//! lets each connection finish the request it is in. With TLS, the
//! handshake runs in the connection's task under the same deadline.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    pub max_connections: usize,
    /// From a connection's first byte (or the end of its previous
    /// response) to the end of a request's headers.
    pub header_timeout: Duration,
}

pub async fn serve_http(
    listener: TcpListener,
    app: axum::Router,
    limits: HttpLimits,
    tls: Option<TlsAcceptor>,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    // Owned here, not detached: when shutdown's grace period ends and this
    // future is dropped, every connection task is aborted with it, and with
    // them the last handles on the writer.
    let mut connections = tokio::task::JoinSet::new();
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    tokio::pin!(shutdown);
    loop {
        while connections.try_join_next().is_some() {}
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            _ = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    // Out of file descriptors, say: wait rather than spin.
                    tracing::warn!(%err, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let (watcher, builder, app, tls) = (graceful.watcher(), builder.clone(), app.clone(), tls.clone());
        connections.spawn(async move {
            match tls {
                None => serve_connection(stream, watcher, &builder, app).await,
                Some(acceptor) => {
                    match tokio::time::timeout(limits.header_timeout, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => serve_connection(stream, watcher, &builder, app).await,
                        Ok(Err(err)) => tracing::debug!(%err, "TLS handshake failed"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                }
            }
            drop(slot);
        });
    }
    graceful.shutdown().await;
}

async fn serve_connection(
    stream: impl AsyncRead + AsyncWrite + Unpin + Send + 'static,
    watcher: Watcher,
    builder: &http1::Builder,
    app: axum::Router,
) {
    let connection = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
    if let Err(err) = watcher.watch(connection).await {
        tracing::debug!(%err, "connection ended with an error");
    }
}
