//! The dashboard's pages: each handler parses the URL's view, reads what
//! the matching JSON routes read, and hands it to `dashboard` to draw.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;

use super::error::ServiceError;
use super::state::AppState;
use crate::dashboard::{self, PageError, View};
use crate::report::Report;
use crate::report::timeseries::Timeseries;
use attempt_core::request::Window;

/// An HTML page; errors are pages too, with the status the JSON routes
/// would give.
pub struct Page {
    status: StatusCode,
    html: String,
}

impl IntoResponse for Page {
    fn into_response(self) -> Response {
        (
            self.status,
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                (header::CONTENT_SECURITY_POLICY, dashboard::CONTENT_SECURITY_POLICY),
                (header::CACHE_CONTROL, "no-store"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            self.html,
        )
            .into_response()
    }
}

fn failed(error: ServiceError, view: Option<View>) -> Page {
    let status = error.kind().http();
    Page { status, html: dashboard::error(view.as_ref(), status.as_u16(), &error.message()) }
}

fn drawn(result: Result<String, PageError>, view: &View) -> Page {
    match result {
        Ok(html) => Page { status: StatusCode::OK, html },
        Err(e) => failed(ServiceError::Internal(e.to_string()), Some(view.clone())),
    }
}

/// The view the URL asks for; the default range fits old data.
async fn view_of(state: &AppState, params: &HashMap<String, String>) -> Result<View, Page> {
    let stored = state.read(|reader| reader.data_minutes()).await.map_err(|e| failed(e, None))?;
    View::parse(params, Utc::now(), stored).map_err(|e| failed(e.into(), None))
}

/// The report and the time series of one view, on one read connection.
async fn report_and_series(state: &AppState, view: &View) -> Result<(Report, Timeseries), Page> {
    let (filter, range) = (view.report_filter(), view.range.clone());
    state
        .read(move |reader| reader.report_and_series(&filter, &range))
        .await
        .map_err(|e| failed(e, Some(view.clone())))
}

type Params = Query<HashMap<String, String>>;

macro_rules! time_page {
    ($name:ident, $draw:path) => {
        pub async fn $name(State(state): State<AppState>, Query(params): Params) -> Page {
            let view = match view_of(&state, &params).await {
                Ok(view) => view,
                Err(page) => return page,
            };
            match report_and_series(&state, &view).await {
                Ok((report, series)) => drawn($draw(&view, &series, &report), &view),
                Err(page) => page,
            }
        }
    };
}

time_page!(overview, dashboard::overview);
time_page!(cost, dashboard::cost);
time_page!(attempts, dashboard::attempts);
time_page!(capacity, dashboard::capacity::capacity);

pub async fn audit(State(state): State<AppState>, Query(params): Params) -> Page {
    let view = match view_of(&state, &params).await {
        Ok(view) => view,
        Err(page) => return page,
    };
    let window = Window {
        since: Some(view.range.from),
        until: Some(view.range.until),
        workflow: view.range.workflow.clone(),
    };
    match state.read(move |reader| reader.audit(window)).await {
        Ok(audit) => drawn(dashboard::audit(&view, &audit), &view),
        Err(e) => failed(e, Some(view)),
    }
}

/// The ledger against the imported bill over the view's range, widened to
/// whole days (or hours, `grain=hour`): cells by drift.
pub async fn reconcile(State(state): State<AppState>, Query(params): Params) -> Page {
    let view = match view_of(&state, &params).await {
        Ok(view) => view,
        Err(page) => return page,
    };
    let mut asked: Vec<(&'static str, String)> = ["grain", "tolerance_usd", "tolerance_pct", "settle_hours"]
        .into_iter()
        .filter_map(|key| params.get(key).map(|v| (key, v.clone())))
        .collect();
    let grain = match params.get("grain").map(|g| g.parse::<attempt_core::reconcile::Grain>()) {
        Some(Ok(grain)) => grain,
        _ => attempt_core::reconcile::Grain::Day,
    };
    asked.push(("since", grain.floor(view.range.from).to_rfc3339()));
    asked.push(("until", grain.ceil(view.range.until).to_rfc3339()));
    let question = match attempt_core::reconcile::Question::from_params(asked.as_slice(), Utc::now()) {
        Ok(question) => question,
        Err(e) => return failed(e.into(), Some(view)),
    };
    match state.read(move |reader| reader.reconcile(&question)).await {
        Ok(answer) => drawn(dashboard::reconcile(&view, &answer), &view),
        Err(e) => failed(e, Some(view)),
    }
}

/// Assignments the tune page's `limits` field may hold.
const MAX_PAGE_LIMITS: usize = 64;

pub async fn tune(State(state): State<AppState>, Query(params): Params) -> Page {
    let view = match view_of(&state, &params).await {
        Ok(view) => view,
        Err(page) => return page,
    };
    let limits = params.get("limits").map(|l| l.trim().to_string()).filter(|l| !l.is_empty());
    let given = limits.iter().flat_map(|l| l.split_whitespace().map(str::to_string)).collect();
    let set = match attempt_core::request::assignments("limits", given, MAX_PAGE_LIMITS) {
        Ok(set) => set,
        Err(e) => return failed(e.into(), Some(view)),
    };
    let candidate = match crate::read::Candidate::from_flags(None, &set) {
        Ok(candidate) => candidate,
        Err(e) => return failed(ServiceError::BadRequest(format!("limits: {e}")), Some(view)),
    };
    let filter = view.report_filter();
    match state.read(move |reader| reader.tune(&filter, candidate.as_ref())).await {
        Ok(tune) => drawn(dashboard::tune(&view, &tune, limits.as_deref()), &view),
        Err(e) => failed(e, Some(view)),
    }
}

pub async fn alerts(State(state): State<AppState>, Query(params): Params) -> Page {
    let view = match view_of(&state, &params).await {
        Ok(view) => view,
        Err(page) => return page,
    };
    let history = match state.read(|reader| reader.alert_history(100)).await {
        Ok(history) => history,
        Err(e) => return failed(e, Some(view)),
    };
    let active = state.observed.active_alerts.read().map(|a| a.clone()).unwrap_or_default();
    let (firing, pending): (Vec<_>, Vec<_>) = active.into_iter().partition(|(_, firing)| *firing);
    let strip = |v: Vec<(attempt_core::alert_event::AlertEvent, bool)>| {
        v.into_iter().map(|(e, _)| e).collect::<Vec<_>>()
    };
    drawn(dashboard::alerts(&view, &strip(firing), &strip(pending), &history), &view)
}

/// `?id=` names the workflow; without it, the search box.
pub async fn workflow(State(state): State<AppState>, Query(params): Params) -> Page {
    let view = match view_of(&state, &params).await {
        Ok(view) => view,
        Err(page) => return page,
    };
    let Some(id) = params.get("id").map(|id| id.trim().to_string()).filter(|id| !id.is_empty()) else {
        return drawn(dashboard::workflow(&view, None, None), &view);
    };
    let asked = id.clone();
    let detail = match state.read(move |reader| reader.workflow(&asked)).await {
        Ok(detail) => detail,
        Err(e) => return failed(e, Some(view)),
    };
    let mut page = drawn(dashboard::workflow(&view, Some(&id), detail.as_ref()), &view);
    if detail.is_none() && page.status == StatusCode::OK {
        // The search box again, saying so, as a 404: the id names no workflow.
        page.status = StatusCode::NOT_FOUND;
    }
    page
}

pub async fn stylesheet() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8"), (header::CACHE_CONTROL, "max-age=300")],
        dashboard::STYLESHEET,
    )
        .into_response()
}
