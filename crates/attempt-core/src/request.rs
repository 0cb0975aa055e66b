//! The questions the read side answers, as every front door asks them: the
//! command line's flags, the JSON routes' and the dashboard's query
//! parameters, an alert rule's window. Each is checked here, once, so a
//! flag and a parameter of the same name accept and refuse the same values
//! with the same words.

use chrono::{DateTime, Duration, Utc};

use crate::policy::PolicySet;
use crate::time_arg::parse_time;

/// The retry-ratio budget per minute when none is asked for (10 %).
pub const DEFAULT_RETRY_BUDGET: f64 = 0.10;

/// Buckets one time series may hold; a range and step past it are refused.
pub const MAX_BUCKETS: i64 = 10_000;
/// Buckets the default step aims at when none is asked for.
pub const DEFAULT_BUCKETS: i64 = 240;
/// How far back a time series reaches when no `since` is given.
pub const DEFAULT_SERIES_HOURS: i64 = 24;

/// Example workflow ids the audit keeps per finding.
pub const AUDIT_EXAMPLES: u32 = 5;

/// A refused question, worded to name the parameter (`since: ...`,
/// `retry_budget: ...`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct RequestError(pub String);

/// Query parameters by name, whatever holds them.
pub trait Params {
    fn param(&self, key: &str) -> Option<&str>;
}

impl Params for std::collections::HashMap<String, String> {
    fn param(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl Params for [(&'static str, String)] {
    fn param(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str())
    }
}

/// A retry budget: a finite fraction >= 0 (0.1 = 10 % of first attempts).
pub fn retry_budget(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|b| b.is_finite() && *b >= 0.0)
        .ok_or_else(|| format!("`{text}` is not a fraction >= 0"))
}

/// A time parameter (RFC 3339, a date, or an age before `now`).
pub fn time_param(
    params: &(impl Params + ?Sized),
    key: &str,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, RequestError> {
    params.param(key).map(|t| parse_time(t, now)).transpose().map_err(|e| RequestError(format!("{key}: {e}")))
}

/// A series step such as `5m`.
pub fn step_param(params: &(impl Params + ?Sized)) -> Result<Option<std::time::Duration>, RequestError> {
    params
        .param("step")
        .map(|s| humantime::parse_duration(s).map_err(|e| RequestError(format!("step: `{s}`: {e}"))))
        .transpose()
}

/// The `retry_budget` parameter, or the default.
pub fn retry_budget_param(params: &(impl Params + ?Sized)) -> Result<f64, RequestError> {
    match params.param("retry_budget") {
        Some(v) => retry_budget(v).map_err(|e| RequestError(format!("retry_budget: {e}"))),
        None => Ok(DEFAULT_RETRY_BUDGET),
    }
}

/// A count parameter (`limit=20`), or `default` when absent.
pub fn count_param(
    params: &(impl Params + ?Sized),
    key: &str,
    default: usize,
) -> Result<usize, RequestError> {
    match params.param(key) {
        Some(v) => v.trim().parse().map_err(|_| RequestError(format!("{key}: `{v}` is not a count"))),
        None => Ok(default),
    }
}

/// A yes/no parameter (`audit=false`), or `default` when absent.
pub fn switch_param(params: &(impl Params + ?Sized), key: &str, default: bool) -> Result<bool, RequestError> {
    match params.param(key) {
        None => Ok(default),
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(v) => Err(RequestError(format!("{key}: `{v}` is not true or false"))),
    }
}

/// A rendering parameter (`format=csv`) naming one of `F`'s values.
pub fn choice_param<F: clap::ValueEnum>(
    params: &(impl Params + ?Sized),
    key: &str,
) -> Result<Option<F>, RequestError> {
    params
        .param(key)
        .map(|name| {
            F::from_str(name, true).map_err(|_| {
                let names: Vec<String> = F::value_variants()
                    .iter()
                    .filter_map(|v| v.to_possible_value())
                    .map(|v| v.get_name().to_string())
                    .collect();
                RequestError(format!("{key}: `{name}` is not one of {}", names.join(", ")))
            })
        })
        .transpose()
}

/// `KEY=VALUE` assignments a request may hold (`tune`'s `set=`, the tune
/// page's `limits`): more than `max` is refused, not read.
pub fn assignments(key: &str, given: Vec<String>, max: usize) -> Result<Vec<String>, RequestError> {
    if given.len() > max {
        return Err(RequestError(format!("{key}: {} assignments; at most {max}", given.len())));
    }
    Ok(given)
}

/// Which workflows a report covers.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportFilter {
    /// Workflows whose first attempt started at or after this instant.
    pub since: Option<DateTime<Utc>>,
    /// ... and before this one.
    pub until: Option<DateTime<Utc>>,
    /// Only workflows with this name (`workflow` field).
    pub workflow: Option<String>,
    /// Retry-ratio budget per minute (0.10 = 10 %).
    pub retry_budget: f64,
    /// Also group outcomes and cost by this dimension (`groups.sql`).
    pub group_by: Option<String>,
}

impl Default for ReportFilter {
    fn default() -> Self {
        Self { since: None, until: None, workflow: None, retry_budget: DEFAULT_RETRY_BUDGET, group_by: None }
    }
}

impl ReportFilter {
    /// `since`, `until`, `workflow`, `retry_budget`, `group_by`.
    pub fn from_params(params: &(impl Params + ?Sized), now: DateTime<Utc>) -> Result<Self, RequestError> {
        let window = Window::from_params(params, now)?;
        Ok(window.report(retry_budget_param(params)?, params.param("group_by").map(str::to_string)))
    }
}

/// The buckets of a time series.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesRange {
    /// First bucket's start; a whole minute.
    pub from: DateTime<Utc>,
    /// End of the last bucket (excluded); a whole minute.
    pub until: DateTime<Utc>,
    pub step_minutes: u32,
    pub workflow: Option<String>,
    /// A provider: workflows whose primary route it is, attempts asked of it.
    pub route: Option<String>,
}

impl SeriesRange {
    /// The whole-minute range covering [since, until) and its step: `since`
    /// floored and `until` ceiled to minutes; the step in whole minutes, by
    /// default the smallest giving at most `DEFAULT_BUCKETS`.
    pub fn new(
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        step: Option<std::time::Duration>,
        workflow: Option<String>,
        route: Option<String>,
    ) -> Result<SeriesRange, RequestError> {
        let refused = |message: String| RequestError(message);
        let floor = |t: DateTime<Utc>| {
            t - Duration::seconds(t.timestamp().rem_euclid(60))
                - Duration::nanoseconds(t.timestamp_subsec_nanos().into())
        };
        let from = floor(since);
        let until = if floor(until) == until { until } else { floor(until) + Duration::minutes(1) };
        if until <= from {
            return Err(refused("until must be after since".to_string()));
        }
        let minutes = (until - from).num_minutes();
        let step_minutes = match step {
            Some(step) => {
                let seconds = step.as_secs();
                if seconds < 60 || seconds % 60 != 0 || step.subsec_nanos() != 0 {
                    return Err(refused(format!(
                        "step: {} is not a whole number of minutes",
                        humantime::format_duration(step)
                    )));
                }
                seconds as i64 / 60
            }
            None => (minutes + DEFAULT_BUCKETS - 1) / DEFAULT_BUCKETS,
        };
        let buckets = (minutes + step_minutes - 1) / step_minutes;
        if buckets > MAX_BUCKETS {
            return Err(refused(format!(
                "{buckets} buckets asked for; at most {MAX_BUCKETS}: a shorter range or a longer step"
            )));
        }
        let step_minutes = u32::try_from(step_minutes).map_err(|_| refused("step: too long".to_string()))?;
        Ok(SeriesRange { from, until, step_minutes, workflow, route })
    }

    /// `since` (default `DEFAULT_SERIES_HOURS` before `until`), `until`
    /// (default now), `step`, `workflow`, `route`.
    pub fn from_params(params: &(impl Params + ?Sized), now: DateTime<Utc>) -> Result<Self, RequestError> {
        let until = time_param(params, "until", now)?.unwrap_or(now);
        let since =
            time_param(params, "since", now)?.unwrap_or(until - Duration::hours(DEFAULT_SERIES_HOURS));
        let text = |key: &str| params.param(key).map(str::to_string);
        SeriesRange::new(since, until, step_param(params)?, text("workflow"), text("route"))
    }
}

/// Which workflows an audit covers, and by which rules.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditFilter {
    pub window: Window,
    /// Each workflow's rules, and the default's.
    pub policy: PolicySet,
    /// Example workflow ids kept per finding.
    pub examples: u32,
}

/// The window of an audit: `since`, `until`, `workflow`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Window {
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    pub workflow: Option<String>,
}

impl Window {
    pub fn from_params(params: &(impl Params + ?Sized), now: DateTime<Utc>) -> Result<Self, RequestError> {
        Ok(Window {
            since: time_param(params, "since", now)?,
            until: time_param(params, "until", now)?,
            workflow: params.param("workflow").map(str::to_string),
        })
    }

    /// The report of this window.
    pub fn report(self, retry_budget: f64, group_by: Option<String>) -> ReportFilter {
        ReportFilter { since: self.since, until: self.until, workflow: self.workflow, retry_budget, group_by }
    }

    /// This window audited with `policy`.
    pub fn audited_with(self, policy: &PolicySet) -> AuditFilter {
        AuditFilter { window: self, policy: policy.clone(), examples: AUDIT_EXAMPLES }
    }
}

impl From<&ReportFilter> for Window {
    fn from(filter: &ReportFilter) -> Window {
        Window { since: filter.since, until: filter.until, workflow: filter.workflow.clone() }
    }
}

/// A route as the report names it: a route group (a gateway's logical model
/// over several deployments), else a provider and model.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default, serde::Serialize)]
pub struct RouteKey {
    pub route_group: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
}

impl std::fmt::Display for RouteKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.route_group, &self.provider, &self.model) {
            (Some(group), _, _) => write!(f, "group {group}"),
            (None, provider, model) => {
                write!(f, "{}/{}", provider.as_deref().unwrap_or("?"), model.as_deref().unwrap_or("?"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: &str) -> DateTime<Utc> {
        t.parse().unwrap()
    }

    /// Query parameters as the dashboard's view holds them.
    fn params(pairs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
        pairs.iter().map(|&(k, v)| (k, v.into())).collect()
    }

    #[test]
    fn a_retry_budget_is_a_finite_fraction_at_least_zero() {
        for good in ["0", "0.1", "2.5", " 0.25 "] {
            assert!(retry_budget(good).is_ok(), "{good}");
        }
        for bad in ["-0.1", "NaN", "inf", "ten", ""] {
            assert_eq!(retry_budget(bad).unwrap_err(), format!("`{bad}` is not a fraction >= 0"));
        }
        let refused = ReportFilter::from_params(&*params(&[("retry_budget", "-1")]), Utc::now()).unwrap_err();
        assert_eq!(refused.to_string(), "retry_budget: `-1` is not a fraction >= 0");
    }

    #[test]
    fn counts_switches_choices_and_assignments_name_their_parameter() {
        let given = params(&[("limit", "20"), ("audit", "false"), ("format", "CSV")]);
        assert_eq!(count_param(&*given, "limit", 100), Ok(20));
        assert_eq!(count_param(&*params(&[]), "limit", 100), Ok(100));
        assert_eq!(switch_param(&*given, "audit", true), Ok(false));
        assert_eq!(switch_param(&*params(&[]), "audit", true), Ok(true));
        assert_eq!(choice_param::<Shape>(&*given, "format"), Ok(Some(Shape::Csv)));
        let refused = |pairs: &[(&'static str, &str)]| {
            let given = params(pairs);
            [
                count_param(&*given, "limit", 1).err(),
                switch_param(&*given, "audit", true).err(),
                choice_param::<Shape>(&*given, "format").err(),
            ]
            .into_iter()
            .flatten()
            .map(|e| e.0)
            .collect::<Vec<_>>()
        };
        assert_eq!(
            refused(&[("limit", "-1"), ("audit", "yes"), ("format", "xml")]),
            [
                "limit: `-1` is not a count",
                "audit: `yes` is not true or false",
                "format: `xml` is not one of json, csv"
            ]
        );
        let three = vec!["a=1".to_string(), "b=2".into(), "c=3".into()];
        assert_eq!(assignments("set", three.clone(), 3), Ok(three.clone()));
        assert_eq!(assignments("set", three, 2).unwrap_err().0, "set: 3 assignments; at most 2");
    }

    #[derive(Debug, Clone, Copy, PartialEq, clap::ValueEnum)]
    enum Shape {
        Json,
        Csv,
    }

    #[test]
    fn a_series_range_is_whole_minutes_and_bounded() {
        let now = at("2026-11-30T15:00:30Z");
        let range = SeriesRange::from_params(&*params(&[("since", "2h")]), now).unwrap();
        assert_eq!((range.from, range.until), (at("2026-11-30T13:00:00Z"), at("2026-11-30T15:01:00Z")));
        assert_eq!(range.step_minutes, 1, "121 minutes in at most 240 buckets");
        let day = SeriesRange::from_params(&*params(&[]), now).unwrap();
        assert_eq!(day.step_minutes, 7, "1,441 minutes in at most 240 buckets");
        let err =
            |pairs: &[(&'static str, &str)]| SeriesRange::from_params(&*params(pairs), now).unwrap_err().0;
        assert!(err(&[("step", "90s")]).contains("whole number of minutes"));
        assert!(err(&[("step", "soon")]).starts_with("step: `soon`"));
        assert!(err(&[("since", "yesterday")]).starts_with("since:"));
        assert_eq!(err(&[("since", "1h"), ("until", "2h")]), "until must be after since");
        assert!(err(&[("since", "30d"), ("step", "1m")]).contains("at most 10000"));
    }

    #[test]
    fn ranges_are_whole_minutes_and_bounded() {
        let r = SeriesRange::new(at("2026-11-28T02:00:30Z"), at("2026-11-28T03:00:01Z"), None, None, None)
            .unwrap();
        assert_eq!(
            (r.from, r.until, r.step_minutes),
            (at("2026-11-28T02:00:00Z"), at("2026-11-28T03:01:00Z"), 1)
        );
        let day = SeriesRange::new(at("2026-11-27T00:00:00Z"), at("2026-11-28T00:00:00Z"), None, None, None)
            .unwrap();
        assert_eq!(day.step_minutes, 6, "1,440 minutes in at most 240 buckets");
        let step = |s| {
            SeriesRange::new(
                at("2026-11-27T00:00:00Z"),
                at("2026-11-28T00:00:00Z"),
                Some(std::time::Duration::from_secs(s)),
                None,
                None,
            )
        };
        assert!(step(90).unwrap_err().0.contains("whole number of minutes"));
        assert!(step(30).is_err());
        assert_eq!(step(300).unwrap().step_minutes, 5);
        let year = SeriesRange::new(
            at("2025-11-28T00:00:00Z"),
            at("2026-11-28T00:00:00Z"),
            Some(std::time::Duration::from_secs(60)),
            None,
            None,
        );
        assert!(year.unwrap_err().0.contains("at most 10000"));
        assert!(
            SeriesRange::new(at("2026-11-28T00:00:00Z"), at("2026-11-28T00:00:00Z"), None, None, None)
                .is_err()
        );
    }
}
