//! What the handlers share, and the one way they read: `AppState::read`
//! lends a connection to a `Reader` and runs it off the async threads.

use std::sync::Arc;

use super::auth::Tokens;
use super::budget::ByteBudget;
use super::error::ServiceError;
use super::readers::Loan;
use super::session::Sessions;
use super::writer::WriterHandle;
use crate::read::{ReadError, Reader};
use crate::report::Freshness;
use attempt_core::pricing::PriceTable;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    pub writer: WriterHandle,
    /// Read connections (`Store` is not `Sync`: one per request, reused).
    pub readers: Arc<super::readers::Readers>,
    pub prices: Arc<PriceTable>,
    /// Largest accepted body, after decompression.
    pub body_limit: usize,
    /// Slots for write requests between reading their body and their
    /// answer: bounds the bodies held in memory (`admit_write`).
    pub write_slots: Arc<tokio::sync::Semaphore>,
    /// Bytes of write bodies held at once, with gRPC's (`budget.rs`).
    pub byte_budget: ByteBudget,
    /// Traces whose calls came recently, over both protocols
    /// (`recent_traces.rs`).
    pub recent_call_traces: Arc<super::recent_traces::RecentCallTraces>,
    /// How long a write request's body may take to arrive.
    pub body_timeout: std::time::Duration,
    /// Bearer tokens by scope; empty: open access (`auth.rs`).
    pub tokens: Arc<Tokens>,
    /// Refuse `Host` headers that do not name this machine (open access on
    /// a loopback address).
    pub local_hosts_only: bool,
    pub observed: Arc<super::observer::Observed>,
    /// Browser sessions opened with a read token (`session.rs`).
    pub sessions: Arc<Sessions>,
    /// Whether the listener speaks TLS (session cookies are then `Secure`).
    pub tls: bool,
    /// The recovery policy the audit applies (`--policy`).
    pub policy: Arc<attempt_core::policy::LoadedPolicy>,
    /// How far derivation lags the writes; reads wait on it.
    pub derivation: Arc<super::deriver::Derivation>,
}

impl AppState {
    /// Runs `read` on a read connection of its own, off the async threads
    /// (a query may take a while), once derivation has reached every write
    /// acknowledged before it was asked (`READ_WAIT` at most); with how
    /// current the answer is.
    pub async fn read_fresh<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Reader<Loan>) -> Result<T, ReadError> + Send + 'static,
    ) -> Result<(T, Freshness), ServiceError> {
        let freshness = self.derivation.caught_up().await;
        let loan = self.readers.take().map_err(|e| ServiceError::Internal(e.to_string()))?;
        let reader = Reader::new(loan, self.prices.clone(), self.policy.clone());
        let answer = tokio::task::spawn_blocking(move || read(&reader))
            .await
            .map_err(|e| ServiceError::Internal(e.to_string()))??;
        Ok((answer, freshness))
    }

    /// `read_fresh`, for answers that do not say how current they are.
    pub async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Reader<Loan>) -> Result<T, ReadError> + Send + 'static,
    ) -> Result<T, ServiceError> {
        Ok(self.read_fresh(read).await?.0)
    }
}
