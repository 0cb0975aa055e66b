//! What a dashboard URL asks for: the time range, the step, the workflow
//! name and the route, parsed once and written back into every link, so a
//! view can be shared by its address.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};

use attempt_core::request::{self, ReportFilter, RequestError, SeriesRange};

/// The URL parameters a page keeps in its links and filter form.
pub const PARAMETERS: [&str; 6] = ["since", "until", "step", "workflow", "route", "retry_budget"];

/// Range shown when the URL names none.
pub const DEFAULT_SPAN_HOURS: i64 = 24;

#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// The parameters as given (non-empty ones only), for links.
    pub given: Vec<(&'static str, String)>,
    pub range: SeriesRange,
    pub retry_budget: f64,
    /// Set when no range was given and the newest data is older than the
    /// default range: the range is then the last day of data, from the
    /// minute after the newest back to the oldest (a stored night of
    /// incidents opens on that night, not on an empty chart).
    pub moved_to_newest: Option<DateTime<Utc>>,
}

impl View {
    /// `stored`: the minutes of the oldest and newest workflow stored.
    pub fn parse(
        params: &HashMap<String, String>,
        now: DateTime<Utc>,
        stored: Option<(DateTime<Utc>, DateTime<Utc>)>,
    ) -> Result<View, RequestError> {
        let given: Vec<(&'static str, String)> = PARAMETERS
            .iter()
            .filter_map(|&key| {
                params.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()).map(|v| (key, v.to_string()))
            })
            .collect();
        let asked: &[(&'static str, String)] = &given;
        let time = |key: &str| request::time_param(asked, key, now);
        let span = Duration::hours(DEFAULT_SPAN_HOURS);
        let mut moved_to_newest = None;
        let mut default_since = None;
        let until = match time("until")? {
            Some(until) => until,
            None => match (time("since")?, stored) {
                (None, Some((oldest, newest))) if newest < now - span => {
                    let end = newest + Duration::minutes(1);
                    moved_to_newest = Some(end);
                    default_since = Some(oldest.max(end - span));
                    end
                }
                _ => now,
            },
        };
        let since = time("since")?.or(default_since).unwrap_or(until - span);
        let retry_budget = request::retry_budget_param(asked)?;
        let text = |key: &str| request::Params::param(asked, key).map(str::to_string);
        let range =
            SeriesRange::new(since, until, request::step_param(asked)?, text("workflow"), text("route"))?;
        Ok(View { given, range, retry_budget, moved_to_newest })
    }

    /// The report over exactly the buckets' range, so the page's totals
    /// are the sums of its charts.
    pub fn report_filter(&self) -> ReportFilter {
        ReportFilter {
            since: Some(self.range.from),
            until: Some(self.range.until),
            workflow: self.range.workflow.clone(),
            retry_budget: self.retry_budget,
            group_by: None,
        }
    }

    /// `?since=…&…` with the given parameters, `overrides` replacing or
    /// removing (`None`) some; empty when nothing is left.
    pub fn query(&self, overrides: &[(&str, Option<&str>)]) -> String {
        let mut pairs: Vec<(&str, &str)> = self
            .given
            .iter()
            .filter(|(k, _)| !overrides.iter().any(|(o, _)| o == k))
            .map(|(k, v)| (*k, v.as_str()))
            .collect();
        pairs.extend(overrides.iter().filter_map(|(k, v)| v.map(|v| (*k, v))));
        pairs.sort_by_key(|(k, _)| PARAMETERS.iter().position(|p| p == k));
        if pairs.is_empty() {
            return String::new();
        }
        format!("?{}", serde_urlencoded::to_string(&pairs).unwrap_or_default())
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.given.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&Utc)
    }

    fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn an_old_database_opens_on_its_newest_day_unless_a_range_is_asked() {
        let now = at("2026-11-30T15:00:00Z");
        let newest = Some((at("2026-11-28T02:00:00Z"), at("2026-11-28T02:59:00Z")));
        let view = View::parse(&params(&[]), now, newest).unwrap();
        assert_eq!(view.range.until, at("2026-11-28T03:00:00Z"));
        assert_eq!(view.range.from, at("2026-11-28T02:00:00Z"), "fits the stored hour");
        assert_eq!(view.moved_to_newest, Some(at("2026-11-28T03:00:00Z")));
        let long = Some((at("2026-11-01T00:00:00Z"), at("2026-11-28T02:59:00Z")));
        assert_eq!(View::parse(&params(&[]), now, long).unwrap().range.from, at("2026-11-27T03:00:00Z"));
        let recent =
            View::parse(&params(&[]), now, Some((at("2026-11-30T14:00:00Z"), at("2026-11-30T14:00:00Z"))))
                .unwrap();
        assert_eq!((recent.range.until, recent.moved_to_newest), (now, None));
        let asked = View::parse(&params(&[("since", "2h")]), now, newest).unwrap();
        assert_eq!((asked.range.from, asked.range.until), (at("2026-11-30T13:00:00Z"), now));
    }

    #[test]
    fn links_keep_the_filters_and_encode_them() {
        let now = at("2026-11-30T15:00:00Z");
        let view = View::parse(
            &params(&[("workflow", "chat & search"), ("since", "2026-11-28T02:00:00Z"), ("route", "")]),
            now,
            None,
        )
        .unwrap();
        assert_eq!(view.query(&[]), "?since=2026-11-28T02%3A00%3A00Z&workflow=chat+%26+search");
        assert_eq!(view.query(&[("workflow", None)]), "?since=2026-11-28T02%3A00%3A00Z");
        assert_eq!(
            view.query(&[("route", Some("openai"))]),
            "?since=2026-11-28T02%3A00%3A00Z&workflow=chat+%26+search&route=openai"
        );
    }

    #[test]
    fn bad_parameters_name_themselves() {
        let now = at("2026-11-30T15:00:00Z");
        let err = |pairs: &[(&str, &str)]| View::parse(&params(pairs), now, None).unwrap_err().0;
        assert!(err(&[("since", "yesterday")]).starts_with("since:"));
        assert!(err(&[("step", "90s")]).contains("whole number of minutes"));
        assert!(err(&[("retry_budget", "-1")]).starts_with("retry_budget:"));
    }
}
