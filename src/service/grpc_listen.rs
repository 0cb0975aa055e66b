//! The gRPC port's accept loop, with the bounds tonic's own `TcpIncoming`
//! leaves out: at most `max_connections` open at once (past it, new ones
//! wait in the kernel's backlog), a deadline for a connection's first byte
//! (a TLS or HTTP/2 handshake that never starts) and for silence after it,
//! and a pause after a failed accept (out of file descriptors, say)
//! instead of a loop that spins on the error.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::{Instant, Sleep};
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

#[derive(Debug, Clone, Copy)]
pub struct GrpcLimits {
    pub max_connections: usize,
    /// From accepting a connection to its first byte.
    pub first_byte_timeout: Duration,
    /// Silence (nothing read, nothing written) after which a connection is
    /// closed; longer than any request may take, so only idle ones go.
    pub idle_timeout: Duration,
}

/// How long the loop waits after a failed accept before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Accepted connections for `serve_with_incoming_shutdown`. The accept
/// loop ends when the server drops the stream.
pub fn incoming(listener: TcpListener, limits: GrpcLimits) -> ReceiverStream<io::Result<Bounded>> {
    let (send, receive) = mpsc::channel(1);
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    tokio::spawn(async move {
        loop {
            let Ok(slot) = slots.clone().acquire_owned().await else { return };
            let stream = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(err) => {
                        tracing::warn!(%err, "cannot accept a gRPC connection");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                },
                _ = send.closed() => return,
            };
            let _ = stream.set_nodelay(true);
            let connection = Bounded::new(stream, slot, limits);
            if send.send(Ok(connection)).await.is_err() {
                return;
            }
        }
    });
    ReceiverStream::new(receive)
}

/// A connection that holds its slot until it is dropped, and fails once it
/// stays silent past its deadline.
pub struct Bounded {
    stream: TcpStream,
    _slot: OwnedSemaphorePermit,
    deadline: Pin<Box<Sleep>>,
    idle_timeout: Duration,
    /// Whether the client has sent a byte: until then only its first byte
    /// moves the deadline (the server's own preface does not).
    spoke: bool,
}

impl Bounded {
    fn new(stream: TcpStream, slot: OwnedSemaphorePermit, limits: GrpcLimits) -> Self {
        let deadline = Box::pin(tokio::time::sleep(limits.first_byte_timeout));
        Bounded { stream, _slot: slot, deadline, idle_timeout: limits.idle_timeout, spoke: false }
    }

    fn heard(&mut self) {
        self.deadline.as_mut().reset(Instant::now() + self.idle_timeout);
    }

    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        self.deadline.as_mut().poll(cx).is_ready()
    }
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "gRPC connection silent past its deadline")
}

impl AsyncRead for Bounded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    self.spoke = true;
                    self.heard();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending if self.expired(cx) => Poll::Ready(Err(timed_out())),
            other => other,
        }
    }
}

impl AsyncWrite for Bounded {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write(cx, data);
        if self.spoke && matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.heard();
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

impl Connected for Bounded {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tonic::codegen::tokio_stream::StreamExt;

    fn limits(max_connections: usize) -> GrpcLimits {
        GrpcLimits {
            max_connections,
            first_byte_timeout: Duration::from_millis(200),
            idle_timeout: Duration::from_millis(400),
        }
    }

    #[tokio::test]
    async fn connections_past_the_cap_wait_and_a_silent_one_is_closed_at_its_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut accepted = incoming(listener, limits(1));
        let _first = TcpStream::connect(address).await.unwrap();
        let mut first = accepted.next().await.unwrap().unwrap();
        let _second = TcpStream::connect(address).await.unwrap();
        let waited = tokio::time::timeout(Duration::from_millis(300), accepted.next()).await;
        assert!(waited.is_err(), "a second connection was accepted past the cap of one");
        // The first says nothing: its read fails at the first-byte deadline.
        let started = Instant::now();
        let err = first.read(&mut [0u8; 8]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(2));
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(2), accepted.next()).await;
        assert!(second.is_ok(), "the freed slot was not given to the waiting connection");
    }
}
