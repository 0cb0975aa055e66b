//! The read side: every question a front door asks of the stored data (the
//! commands, the JSON routes, the dashboard's pages, the alert evaluator,
//! the metrics refresher), answered here in one snapshot each and returned
//! shaped (`report`'s types). A front door parses its question into the
//! request types of `attempt_core::request`, calls one method, and encodes
//! the answer; a new reader is a new method here.

use std::borrow::Borrow;
use std::sync::Arc;

use crate::report::Report;
use crate::report::audit::Audit;
use crate::report::reconcile::{Options as ReconcileOptions, Reconciliation};
use crate::report::timeseries::Timeseries;
use crate::report::tune::{ReplayInput, Suggestion, Tune};
use crate::report::workflow::WorkflowDetail;
use crate::store::bill::ReconcileScope;
use crate::store::queries::MetricRow;
use crate::store::tune::Names;
use crate::store::{Query, Snapshot, Store, StoreError, TimeBounds};
use attempt_core::alert_event::AlertEvent;
use attempt_core::policy::LoadedPolicy;
use attempt_core::pricing::PriceTable;
use attempt_core::reconcile::Question;
use attempt_core::request::{ReportFilter, SeriesRange, Window};

mod replay;

/// Why a question got no answer: it named what is not there (a 400 over
/// HTTP), or the storage failed (a 500).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Asked(String),
    #[error(transparent)]
    Storage(StoreError),
}

impl From<StoreError> for ReadError {
    fn from(error: StoreError) -> ReadError {
        match error {
            e @ StoreError::UnknownDimension { .. } => ReadError::Asked(e.to_string()),
            e => ReadError::Storage(e),
        }
    }
}

/// A policy to replay: its limits (`--policy FILE`, `--set KEY=VALUE`) and
/// how the answer names it.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub limits: attempt_core::policy::LimitSet,
    pub description: String,
}

impl Candidate {
    /// The policy file's sections with the assignments over each; `None`
    /// when neither is given (no replay).
    pub fn from_flags(
        policy: Option<&std::path::Path>,
        set: &[String],
    ) -> Result<Option<Candidate>, attempt_core::policy::PolicyError> {
        if policy.is_none() && set.is_empty() {
            return Ok(None);
        }
        let limits = match policy {
            Some(path) => attempt_core::policy::LimitSet::load(path)?,
            None => attempt_core::policy::LimitSet::default(),
        };
        let overrides = attempt_core::policy::Limits::from_assignments(set)?;
        let mut description: Vec<String> = policy.iter().map(|p| p.display().to_string()).collect();
        description.extend(set.iter().cloned());
        Ok(Some(Candidate { limits: limits.with_overrides(&overrides), description: description.join(" ") }))
    }
}

/// The report queries alert rules read; the rest of the report is not
/// computed for them.
const ALERT_QUERIES: [Query; 10] = [
    Query::Outcomes,
    Query::Waste,
    Query::RetryBudget,
    Query::ErrorClasses,
    Query::Routes,
    Query::Fallbacks,
    Query::Headroom,
    Query::ServedErrors,
    Query::Circuits,
    Query::FallbackCosts,
];

/// A read connection with the prices and the recovery policy every answer
/// is computed with. `S` is the connection: a `Store` a command opened, or
/// one on loan from the service's pool.
pub struct Reader<S = Store> {
    store: S,
    prices: Arc<PriceTable>,
    policy: Arc<LoadedPolicy>,
}

impl<S: Borrow<Store>> Reader<S> {
    pub fn new(store: S, prices: Arc<PriceTable>, policy: Arc<LoadedPolicy>) -> Self {
        Reader { store, prices, policy }
    }

    fn store(&self) -> &Store {
        self.store.borrow()
    }

    pub fn policy(&self) -> &LoadedPolicy {
        &self.policy
    }

    /// The report of the workflows `filter` selects, its lists folded to
    /// their bounds (`report::fold`), with the recovery audit of the same
    /// workflows in the same snapshot when `with_audit`.
    pub fn report(&self, filter: &ReportFilter, with_audit: bool) -> Result<Report, ReadError> {
        Ok(self.store().snapshot(&self.prices, |snapshot| self.report_in(snapshot, filter, with_audit))?)
    }

    /// A dashboard page's report (no audit) and the chart of `range`, in
    /// one snapshot: the totals and the chart count the same commits.
    pub fn report_and_series(
        &self,
        filter: &ReportFilter,
        range: &SeriesRange,
    ) -> Result<(Report, Timeseries), ReadError> {
        Ok(self.store().snapshot(&self.prices, |snapshot| {
            let report = self.report_in(snapshot, filter, false)?;
            Ok((report, Timeseries::from_rows(range, &snapshot.series_rows(range)?)))
        })?)
    }

    fn report_in(
        &self,
        snapshot: &Snapshot,
        filter: &ReportFilter,
        with_audit: bool,
    ) -> Result<Report, StoreError> {
        let rows = snapshot.report_rows(filter, &Query::ALL)?;
        let mut report = Report::from_rows(&rows, filter.retry_budget);
        if with_audit {
            let audit_rows = snapshot.audit_rows(&Window::from(filter).audited_with(&self.policy.set))?;
            report.audit = Some(Audit::of(&self.policy, &audit_rows));
        }
        Ok(report)
    }

    /// The parts of the report alert rules read, every route listed (a
    /// rule may name one past the report's bound).
    pub fn alert_report(&self, filter: &ReportFilter) -> Result<Report, ReadError> {
        let rows = self.store().report_rows_of(filter, &self.prices, &ALERT_QUERIES)?;
        Ok(Report::from_unfolded_rows(&rows, filter.retry_budget))
    }

    /// The recovery audit of the workflows in `window`.
    pub fn audit(&self, window: Window) -> Result<Audit, ReadError> {
        let rows = self.store().audit(&window.audited_with(&self.policy.set), &self.prices)?;
        Ok(Audit::of(&self.policy, &rows))
    }

    /// The value-of-each-retry curve of the workflows `filter` selects and,
    /// with a candidate policy, its replay against the same workflows' report.
    /// The ledger held against the imported bill (`report::reconcile`).
    pub fn reconcile(&self, question: &Question) -> Result<Reconciliation, ReadError> {
        let scope = ReconcileScope { since: question.since, until: question.until, grain: question.grain };
        let rows = self.store().reconcile_rows(&scope, &self.prices)?;
        let options =
            ReconcileOptions { tolerance: question.tolerance, settled_before: question.settled_before };
        Ok(crate::report::reconcile::reconcile(rows, &scope, options))
    }

    pub fn tune(&self, filter: &ReportFilter, candidate: Option<&Candidate>) -> Result<Tune, ReadError> {
        let sections: Vec<String> = candidate
            .map(|c| c.limits.workflows.iter().map(|(name, _)| name.clone()).collect())
            .unwrap_or_default();
        let (rows, curve, replayed) =
            self.store().tune_read(filter, &self.prices, Names::Sections(&sections), |snapshot| {
                let rows = snapshot.report_rows()?;
                let curve = snapshot.curve_rows()?;
                let replayed = candidate.map(|c| replay::replay(snapshot, &c.limits)).transpose()?;
                Ok((rows, curve, replayed))
            })?;
        let input = candidate
            .zip(replayed)
            .map(|(candidate, figures)| ReplayInput { policy: candidate.description.clone(), figures });
        Ok(Tune::shape(&rows, &curve, input))
    }

    /// For each workflow name in `filter`'s window, the smallest limits
    /// whose replay keeps its success within `tolerance_pp`.
    pub fn suggest(&self, filter: &ReportFilter, tolerance_pp: f64) -> Result<Suggestion, ReadError> {
        let suggested = self.store().tune_read(filter, &self.prices, Names::Every, |snapshot| {
            let report = Report::from_unfolded_rows(&snapshot.report_rows()?, filter.retry_budget);
            let totals =
                report.by_workflow.iter().map(|w| (w.workflow.clone(), w.workflows.total as u64)).collect();
            replay::suggest(snapshot, &totals, tolerance_pp)
        })?;
        Ok(Suggestion::shape(&suggested, tolerance_pp))
    }

    /// Every bucket of `range`.
    pub fn timeseries(&self, range: &SeriesRange) -> Result<Timeseries, ReadError> {
        let rows = self.store().timeseries(range, &self.prices)?;
        Ok(Timeseries::from_rows(range, &rows))
    }

    /// Every attempt of one workflow; `None` when no workflow has this id.
    pub fn workflow(&self, workflow_id: &str) -> Result<Option<WorkflowDetail>, ReadError> {
        let (rows, circuits) = self.store().workflow_attempts(workflow_id, &self.prices)?;
        Ok(WorkflowDetail::from_rows(workflow_id, &rows, &circuits))
    }

    /// The newest `limit` alert events, newest first.
    pub fn alert_history(&self, limit: usize) -> Result<Vec<AlertEvent>, ReadError> {
        Ok(self.store().alert_history(limit)?)
    }

    /// Alerts whose last recorded state is firing.
    pub fn open_alerts(&self) -> Result<Vec<AlertEvent>, ReadError> {
        Ok(self.store().open_alerts()?)
    }

    /// The minutes of the oldest and newest workflow stored.
    pub fn data_minutes(&self) -> Result<Option<TimeBounds>, ReadError> {
        Ok(self.store().data_minutes()?)
    }

    /// First and last `started_at` stored.
    pub fn attempt_bounds(&self) -> Result<Option<TimeBounds>, ReadError> {
        Ok(self.store().attempt_bounds()?)
    }

    /// The stored-data samples of `/metrics`, over every stored workflow.
    pub fn metric_rows(&self) -> Result<Vec<MetricRow>, ReadError> {
        Ok(self.store().metric_rows(&self.prices)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::PrimaryRoute;
    use attempt_core::request::RouteKey;

    /// The measure of this module: a new reader (here, one route's line of
    /// the report) is one method over the ones above, and its caller.
    impl<S: Borrow<Store>> Reader<S> {
        fn primary_route(
            &self,
            filter: &ReportFilter,
            route: &RouteKey,
        ) -> Result<Option<PrimaryRoute>, ReadError> {
            let report = self.alert_report(filter)?;
            Ok(report.by_primary_route.into_iter().find(|r| &r.key() == route))
        }
    }

    #[test]
    fn a_new_reader_is_one_method() {
        let store = Store::open_in_memory().unwrap();
        let lines = [
            r#"{"attempt_id":"a1","workflow_id":"w1","started_at":"2026-11-28T02:00:00Z","provider":"openai","model":"gpt-4o","status":"error","http_status":529,"decision":"retry"}"#,
            r#"{"attempt_id":"a2","workflow_id":"w1","started_at":"2026-11-28T02:00:01Z","provider":"openai","model":"gpt-4o","status":"ok"}"#,
            r#"{"attempt_id":"b1","workflow_id":"w2","started_at":"2026-11-28T02:00:02Z","provider":"anthropic","model":"claude","status":"ok"}"#,
        ];
        let attempts: Vec<_> =
            lines.iter().map(|l| attempt_core::ingest::jsonl::decode_line(l).unwrap()).collect();
        store.write_batch(&attempts).unwrap();
        store.catch_up().unwrap();
        let reader = Reader::new(store, Arc::new(PriceTable::load(None).unwrap()), Arc::default());
        let openai =
            RouteKey { route_group: None, provider: Some("openai".into()), model: Some("gpt-4o".into()) };
        let line = reader.primary_route(&ReportFilter::default(), &openai).unwrap().unwrap();
        assert_eq!((line.workflows, line.primary_success, line.retry_recovery), (1, 0, 1));
        let nowhere = RouteKey { provider: Some("mistral".into()), ..openai };
        assert_eq!(reader.primary_route(&ReportFilter::default(), &nowhere).unwrap(), None);
    }

    /// While another connection commits writes and their derivation, every
    /// page's report and chart count the same workflows: they come from one
    /// snapshot (two reads in turn would each see a different commit).
    #[test]
    fn a_pages_report_and_chart_come_from_one_snapshot() {
        let store = Store::open_in_memory().unwrap();
        let writer = store.try_clone().unwrap();
        let line = |i: u32| {
            format!(
                r#"{{"attempt_id":"a{i}","workflow_id":"w{i}","started_at":"2026-11-28T02:{:02}:{:02}Z","provider":"openai","model":"gpt-4o","status":"ok"}}"#,
                (i / 60) % 10,
                i % 60
            )
        };
        let done = std::sync::atomic::AtomicBool::new(false);
        let at = |t: &str| chrono::DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&chrono::Utc);
        let range =
            SeriesRange::new(at("2026-11-28T02:00:00Z"), at("2026-11-28T02:10:00Z"), None, None, None)
                .unwrap();
        let filter =
            ReportFilter { since: Some(range.from), until: Some(range.until), ..ReportFilter::default() };
        let reader = Reader::new(store, Arc::new(PriceTable::load(None).unwrap()), Arc::default());
        let (done_flag, line) = (&done, &line);
        std::thread::scope(|scope| {
            scope.spawn(move || {
                for batch in 0..40u32 {
                    let attempts: Vec<_> = (batch * 10..batch * 10 + 10)
                        .map(|i| attempt_core::ingest::jsonl::decode_line(&line(i)).unwrap())
                        .collect();
                    writer.write_batch(&attempts).unwrap();
                    writer.catch_up().unwrap();
                }
                done_flag.store(true, std::sync::atomic::Ordering::Relaxed);
            });
            let mut pages = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) || pages == 0 {
                let (report, series) = reader.report_and_series(&filter, &range).unwrap();
                let charted: i64 = series.buckets.iter().map(|b| b.attempts).sum();
                assert_eq!(charted, report.attempts.total, "page {pages}");
                pages += 1;
            }
        });
        let (report, _) = reader.report_and_series(&filter, &range).unwrap();
        assert_eq!(report.attempts.total, 400);
    }
}
