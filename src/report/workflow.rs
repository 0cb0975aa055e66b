//! The workflow page's data: every attempt of one `workflow_id`, in order,
//! as `GET /api/v1/workflows/{workflow_id}` answers it (dollars, not
//! pico-dollars; enums by their record-format spelling).

use attempt_core::request::RouteKey;
use serde::Serialize;

use super::usd;
use crate::store::queries::{WorkflowAttemptRow, WorkflowCircuitRow};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkflowDetail {
    pub workflow_id: String,
    pub workflow: Option<String>,
    pub outcome: &'static str,
    pub primary_route: RouteKey,
    /// Error class that led to the fallback; `none` when nothing failed
    /// first; `null` when the workflow never fell back.
    pub fallback_reason: Option<String>,
    pub attempts: Vec<AttemptView>,
    pub cost_usd: f64,
    /// Cost of attempts whose answer was not delivered.
    pub wasted_cost_usd: f64,
    /// Attempts whose cost is unknown (not in `cost_usd`).
    pub unknown_cost_attempts: usize,
    /// The open and half-open breaker intervals of the routes its attempts
    /// asked that overlap the workflow (docs/record-format.md, "Breaker
    /// timelines"), oldest first.
    pub circuits: Vec<WorkflowCircuit>,
}

/// A breaker interval a workflow met.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkflowCircuit {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub route_group: Option<String>,
    /// Whose breaker: a workflow name, or every caller's (null).
    pub workflow: Option<String>,
    pub state: String,
    pub from: String,
    /// Null while it lasts.
    pub until: Option<String>,
    /// This workflow's attempts to the route that started in it.
    pub attempts: i64,
}

impl WorkflowCircuit {
    pub fn route(&self) -> RouteKey {
        RouteKey {
            route_group: self.route_group.clone(),
            provider: self.provider.clone(),
            model: self.model.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptView {
    pub seq: i64,
    pub attempt_id: String,
    pub started_at: String,
    pub layer: &'static str,
    pub provider: String,
    pub model: String,
    pub route_group: Option<String>,
    /// primary | fallback
    pub route: String,
    pub served_provider: String,
    pub served_model: String,
    pub status: String,
    pub http_status: Option<i32>,
    pub error_class: Option<&'static str>,
    pub error_code: Option<String>,
    /// From the previous attempt's end to this one's start.
    pub wait_ms: Option<f64>,
    pub duration_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub retry_after_ms: Option<f64>,
    pub decision: Option<String>,
    pub commit_state: String,
    pub visible_output: Option<bool>,
    pub circuit: Option<String>,
    pub delivered: bool,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cached_input_tokens: Option<i64>,
    pub cache_write_input_tokens: Option<i64>,
    /// emitter | free | unknown | priced
    pub cost_kind: String,
    /// `null`: unknown.
    pub cost_usd: Option<f64>,
}

impl WorkflowDetail {
    /// `None` when there are no rows (no workflow has this id).
    pub fn from_rows(
        workflow_id: &str,
        rows: &[WorkflowAttemptRow],
        circuits: &[WorkflowCircuitRow],
    ) -> Option<WorkflowDetail> {
        let instant =
            |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let first = rows.first()?;
        let attempts: Vec<AttemptView> = rows
            .iter()
            .map(|r| AttemptView {
                seq: r.seq,
                attempt_id: r.attempt_id.clone(),
                started_at: r.started_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                layer: r.layer.into(),
                provider: r.provider.clone(),
                model: r.model.clone(),
                route_group: r.route_group.clone(),
                route: r.effective_route.clone(),
                served_provider: r.served_provider.clone(),
                served_model: r.served_model.clone(),
                status: r.status.clone(),
                http_status: r.http_status,
                error_class: r.error_class.map(<&'static str>::from),
                error_code: r.error_code.clone(),
                wait_ms: r.wait_ms,
                duration_ms: r.duration_ms,
                ttft_ms: r.ttft_ms,
                retry_after_ms: r.retry_after_ms,
                decision: r.decision.clone(),
                commit_state: r.commit_state.clone(),
                visible_output: r.visible_output,
                circuit: r.circuit.clone(),
                delivered: r.delivered,
                input_tokens: r.input_tokens,
                output_tokens: r.output_tokens,
                cached_input_tokens: r.cached_input_tokens,
                cache_write_input_tokens: r.cache_write_input_tokens,
                cost_kind: r.cost_kind.clone(),
                cost_usd: r.cost_pusd.map(usd),
            })
            .collect();
        let known = || rows.iter().filter_map(|r| r.cost_pusd.map(|c| (r.delivered, c)));
        Some(WorkflowDetail {
            workflow_id: workflow_id.to_string(),
            workflow: first.workflow_name.clone(),
            outcome: first.outcome.into(),
            primary_route: RouteKey {
                route_group: first.primary_route_group.clone(),
                provider: first.primary_provider.clone(),
                model: first.primary_model.clone(),
            },
            fallback_reason: first.fallback_reason.clone(),
            cost_usd: usd(known().map(|(_, c)| c).sum()),
            wasted_cost_usd: usd(known().filter(|(delivered, _)| !delivered).map(|(_, c)| c).sum()),
            unknown_cost_attempts: rows.iter().filter(|r| r.cost_pusd.is_none()).count(),
            attempts,
            circuits: circuits
                .iter()
                .map(|c| WorkflowCircuit {
                    provider: c.provider.clone(),
                    model: c.model.clone(),
                    route_group: c.route_group.clone(),
                    workflow: c.workflow_name.clone(),
                    state: c.state.clone(),
                    from: instant(c.from),
                    until: c.until.map(instant),
                    attempts: c.attempts,
                })
                .collect(),
        })
    }
}
