//! One struct per notable event of the service; `emit` logs it and counts
//! it (`super::families`). A site that something happens at emits its
//! event and does nothing else about telemetry, so the log and `/metrics`
//! cannot disagree.

use super::{families, labels};

/// The receivers of ingest requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receiver {
    /// `POST /v1/attempts` and `POST /v1/litellm`.
    Attempts,
    OtlpHttp,
    OtlpGrpc,
}

impl Receiver {
    pub const ALL: [Receiver; 3] = [Receiver::Attempts, Receiver::OtlpHttp, Receiver::OtlpGrpc];

    pub fn name(self) -> &'static str {
        match self {
            Receiver::Attempts => "attempts",
            Receiver::OtlpHttp => "otlp_http",
            Receiver::OtlpGrpc => "otlp_grpc",
        }
    }
}

/// An ingest request arrived at a receiver.
pub struct IngestRequest {
    pub receiver: Receiver,
}

impl IngestRequest {
    pub fn emit(self) {
        families().ingest_requests.get_or_create(&labels(&[("receiver", self.receiver.name())])).inc();
    }
}

/// Records of a request that validation rejected (each is named in the
/// request's answer).
pub struct RecordsRejected {
    pub receiver: Receiver,
    pub records: u64,
}

impl RecordsRejected {
    pub fn emit(self) {
        if self.records == 0 {
            return;
        }
        tracing::debug!(receiver = self.receiver.name(), records = self.records, "records rejected");
        families().ingest_records.get_or_create(&labels(&[("result", "rejected")])).inc_by(self.records);
    }
}

/// OTLP log records that are not breaker state changes: counted, not
/// stored (an SDK exporting every log loses nothing it needs).
pub struct RecordsIgnored {
    pub receiver: Receiver,
    pub records: u64,
}

impl RecordsIgnored {
    pub fn emit(self) {
        if self.records == 0 {
            return;
        }
        tracing::debug!(receiver = self.receiver.name(), records = self.records, "records ignored");
        families().ingest_records.get_or_create(&labels(&[("result", "ignored")])).inc_by(self.records);
    }
}

/// Where a write was refused for want of room: the answer is 503 with
/// Retry-After (gRPC: UNAVAILABLE), and the client resends.
#[derive(Debug, Clone, Copy)]
pub enum Refusal {
    /// Every write slot taken.
    Slots,
    /// The byte budget spent by bodies already held.
    Bytes,
    /// The writer's queue full.
    Queue,
}

pub struct WriteRefused {
    pub by: Refusal,
}

impl WriteRefused {
    pub fn emit(self) {
        tracing::debug!(by = ?self.by, "write refused for want of room");
        families().ingest_requests_refused.inc();
    }
}

/// The writer committed `transactions` (a group commit is one).
pub struct BatchesCommitted {
    pub transactions: u64,
}

impl BatchesCommitted {
    pub fn emit(self) {
        families().ingest_batches_committed.inc_by(self.transactions);
    }
}

/// A request's batch the writer could not store (alone, after its group
/// failed): the client was told to retry.
pub struct BatchFailed<'a> {
    pub error: &'a dyn std::fmt::Display,
}

impl BatchFailed<'_> {
    pub fn emit(self) {
        tracing::error!(error = %self.error, "batch not stored");
        families().ingest_batches_failed.inc();
    }
}

/// One request's records, committed.
pub struct RecordsStored {
    pub inserted: u64,
    pub duplicates: u64,
    pub conflicts: u64,
}

impl RecordsStored {
    pub fn emit(self) {
        let records = &families().ingest_records;
        records.get_or_create(&labels(&[("result", "accepted")])).inc_by(self.inserted);
        records.get_or_create(&labels(&[("result", "duplicate")])).inc_by(self.duplicates);
        records.get_or_create(&labels(&[("result", "conflict")])).inc_by(self.conflicts);
    }
}

/// Every rule evaluated once, in `seconds`; `active` has each rule's
/// (name, pending, firing) alerts after it.
pub struct AlertsEvaluated<'a> {
    pub seconds: f64,
    pub active: &'a [(String, i64, i64)],
}

impl AlertsEvaluated<'_> {
    pub fn emit(self) {
        let f = families();
        f.alert_evaluations.inc();
        f.alert_evaluation_seconds.set(self.seconds);
        for (rule, pending, firing) in self.active {
            f.alerts.get_or_create(&labels(&[("rule", rule), ("state", "pending")])).set(*pending);
            f.alerts.get_or_create(&labels(&[("rule", rule), ("state", "firing")])).set(*firing);
        }
    }
}

/// A rule could not be evaluated; its alerts keep their state.
pub struct RuleEvaluationFailed<'a> {
    pub rule: &'a str,
    pub error: &'a str,
}

impl RuleEvaluationFailed<'_> {
    pub fn emit(self) {
        tracing::error!(rule = %self.rule, error = %self.error, "rule evaluation failed");
        families().alert_evaluation_failures.inc();
    }
}

/// A round of a background loop panicked (a bug); the loop goes on.
pub struct LoopPanicked<'a> {
    pub loop_name: &'a str,
    pub message: &'a str,
}

impl LoopPanicked<'_> {
    pub fn emit(self) {
        tracing::error!(
            loop_name = self.loop_name,
            panic = self.message,
            "a background loop round panicked; it goes on"
        );
        families().background_loop_panics.inc();
    }
}

/// A derivation round committed; `clamped` attempts had a duration, TTFT
/// or retry-after past the bound.
pub struct DerivationRound {
    pub clamped: u64,
}

impl DerivationRound {
    pub fn emit(self) {
        let f = families();
        f.derivation_rounds.inc();
        f.derivation_clamped_values.inc_by(self.clamped);
    }
}

/// A derivation round failed on storage, or panicked (`error` is `None`);
/// it is retried.
pub struct DerivationRoundFailed<'a> {
    pub error: Option<&'a dyn std::fmt::Display>,
}

impl DerivationRoundFailed<'_> {
    pub fn emit(self) {
        match self.error {
            Some(error) => tracing::error!(%error, "derivation round failed; retrying"),
            None => tracing::error!("derivation round panicked; retrying"),
        }
        families().derivation_round_failures.inc();
    }
}

/// An export to the attempt lake completed.
pub struct LakeExported {
    pub through: i64,
    pub attempts: u64,
    pub files: u64,
    pub bytes: u64,
    pub seconds: f64,
}

impl LakeExported {
    pub fn emit(self) {
        tracing::info!(
            through = self.through,
            attempts = self.attempts,
            files = self.files,
            bytes = self.bytes,
            seconds = self.seconds,
            "exported to the lake"
        );
        let f = families();
        f.lake_exports.inc();
        f.lake_exported_attempts.inc_by(self.attempts);
        f.lake_exported_bytes.inc_by(self.bytes);
    }
}

/// An export to the attempt lake failed; the next check does it again.
pub struct LakeExportFailed<'a> {
    pub error: &'a dyn std::fmt::Display,
}

impl LakeExportFailed<'_> {
    pub fn emit(self) {
        tracing::error!(error = %self.error, "export to the lake failed; retrying at the next check");
        families().lake_export_failures.inc();
    }
}

/// What became of one notification to one receiver.
#[derive(Debug, Clone, Copy)]
pub enum Delivery {
    Sent,
    /// Retried past `max_tries`, then given up.
    Failed,
    /// The receiver's queue was full.
    Dropped,
}

impl Delivery {
    const ALL: [Delivery; 3] = [Delivery::Sent, Delivery::Failed, Delivery::Dropped];

    fn name(self) -> &'static str {
        match self {
            Delivery::Sent => "sent",
            Delivery::Failed => "failed",
            Delivery::Dropped => "dropped",
        }
    }
}

/// An alert receiver of the rules file, at the start: its series read 0.
pub struct ReceiverStarted<'a> {
    pub receiver: &'a str,
}

impl ReceiverStarted<'_> {
    pub fn emit(self) {
        let f = families();
        for delivery in Delivery::ALL {
            f.notifications
                .get_or_create(&labels(&[("receiver", self.receiver), ("result", delivery.name())]))
                .inc_by(0);
        }
        f.notification_retries.get_or_create(&labels(&[("receiver", self.receiver)])).inc_by(0);
    }
}

pub struct NotificationDelivered<'a> {
    pub receiver: &'a str,
    pub alert: &'a str,
    pub delivery: Delivery,
    pub tries: u32,
    /// Why the last try failed.
    pub reason: Option<&'a str>,
}

impl NotificationDelivered<'_> {
    pub fn emit(self) {
        let (receiver, alert) = (self.receiver, self.alert);
        match self.delivery {
            Delivery::Sent => tracing::debug!(receiver, alert, tries = self.tries, "notification sent"),
            Delivery::Failed => tracing::error!(
                receiver,
                alert,
                tries = self.tries,
                reason = self.reason.unwrap_or(""),
                "notification given up"
            ),
            Delivery::Dropped => tracing::warn!(receiver, alert, "notification dropped: queue full"),
        }
        families()
            .notifications
            .get_or_create(&labels(&[("receiver", receiver), ("result", self.delivery.name())]))
            .inc();
    }
}

/// A delivery failed and is tried again after `retry_in_ms`.
pub struct NotificationRetried<'a> {
    pub receiver: &'a str,
    pub alert: &'a str,
    pub tries: u32,
    pub reason: &'a str,
    pub retry_in_ms: u64,
}

impl NotificationRetried<'_> {
    pub fn emit(self) {
        let (receiver, alert, reason) = (self.receiver, self.alert, self.reason);
        tracing::warn!(
            receiver,
            alert,
            tries = self.tries,
            reason,
            retry_in_ms = self.retry_in_ms,
            "notification failed; retrying"
        );
        families().notification_retries.get_or_create(&labels(&[("receiver", receiver)])).inc();
    }
}

/// A provider's export fetched and imported.
pub struct BillFetched<'a> {
    pub source: &'a str,
    pub pages: usize,
    pub requests: u32,
    pub throttled: u32,
    pub buckets: u64,
    pub facts: u64,
}

impl BillFetched<'_> {
    pub fn emit(self) {
        tracing::info!(
            source = self.source,
            pages = self.pages,
            requests = self.requests,
            throttled = self.throttled,
            buckets = self.buckets,
            facts = self.facts,
            "bill fetched and imported"
        );
        families().bill_fetches.inc();
    }
}

/// A fetch or import of a provider's bill failed; the next run tries again.
pub struct BillFetchFailed<'a> {
    pub provider: &'a str,
    pub error: &'a dyn std::fmt::Display,
}

impl BillFetchFailed<'_> {
    pub fn emit(self) {
        tracing::error!(provider = self.provider, error = %self.error, "bill fetch failed; retrying at the next run");
        families().bill_fetch_failures.inc();
    }
}

/// A provider's last settled, compared day, held against its bill.
pub struct BillDrift<'a> {
    pub provider: &'a str,
    pub day: chrono::DateTime<chrono::Utc>,
    /// Pico-dollars.
    pub ledger_usd: i128,
    pub billed_usd: i128,
}

impl BillDrift<'_> {
    pub fn emit(self) {
        let f = families();
        let label = labels(&[("provider", self.provider)]);
        let drift = self.ledger_usd - self.billed_usd;
        f.bill_drift_usd.get_or_create(&label).set(drift as f64 / 1e12);
        if self.billed_usd != 0 {
            f.bill_drift_ratio.get_or_create(&label).set(drift as f64 / self.billed_usd as f64);
        } else {
            f.bill_drift_ratio.remove(&label);
        }
        f.bill_drift_day_timestamp_seconds.get_or_create(&label).set(self.day.timestamp());
    }
}
