//! The charts' data: `GET /api/v1/timeseries`, every bucket of the range
//! (empty ones as zeros, so a chart's x axis is the range), workflows by
//! outcome, and attempts, retries and cost by the provider that served.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde::Serialize;
use strum::VariantNames;

use super::usd;
use crate::model::Outcome;
use crate::store::queries::{SeriesRange, SeriesRow};

/// Buckets one answer may hold; a range and step past it are refused.
pub const MAX_BUCKETS: i64 = 10_000;
/// Buckets the default step aims at when none is asked for.
pub const DEFAULT_BUCKETS: i64 = 240;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timeseries {
    pub since: String,
    pub until: String,
    pub step_seconds: i64,
    pub workflow: Option<String>,
    pub buckets: Vec<Bucket>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Bucket {
    pub start: String,
    /// Workflows whose first attempt started in the bucket, by outcome
    /// (every outcome, zeros included).
    pub workflows: BTreeMap<&'static str, i64>,
    pub attempts: i64,
    pub retries: i64,
    /// Known cost; attempts of unknown cost are counted apart.
    pub cost_usd: f64,
    pub wasted_cost_usd: f64,
    pub unknown_cost_attempts: i64,
    pub cost_by_served_provider: BTreeMap<String, f64>,
    pub wasted_cost_by_served_provider: BTreeMap<String, f64>,
}

/// The whole-minute range covering [since, until) and its step: `since`
/// floored and `until` ceiled to minutes; the step in whole minutes, by
/// default the smallest giving at most `DEFAULT_BUCKETS`.
pub fn range(
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    step: Option<std::time::Duration>,
    workflow: Option<String>,
) -> Result<SeriesRange, String> {
    let floor = |t: DateTime<Utc>| {
        t - Duration::seconds(t.timestamp().rem_euclid(60))
            - Duration::nanoseconds(t.timestamp_subsec_nanos().into())
    };
    let from = floor(since);
    let until = if floor(until) == until { until } else { floor(until) + Duration::minutes(1) };
    if until <= from {
        return Err("until must be after since".to_string());
    }
    let minutes = (until - from).num_minutes();
    let step_minutes = match step {
        Some(step) => {
            let seconds = step.as_secs();
            if seconds < 60 || seconds % 60 != 0 || step.subsec_nanos() != 0 {
                return Err(format!(
                    "step: {} is not a whole number of minutes",
                    humantime::format_duration(step)
                ));
            }
            seconds as i64 / 60
        }
        None => (minutes + DEFAULT_BUCKETS - 1) / DEFAULT_BUCKETS,
    };
    let buckets = (minutes + step_minutes - 1) / step_minutes;
    if buckets > MAX_BUCKETS {
        return Err(format!(
            "{buckets} buckets asked for; at most {MAX_BUCKETS}: a shorter range or a longer step"
        ));
    }
    let step_minutes = u32::try_from(step_minutes).map_err(|_| "step: too long".to_string())?;
    Ok(SeriesRange { from, until, step_minutes, workflow })
}

impl Timeseries {
    pub fn from_rows(range: &SeriesRange, rows: &[SeriesRow]) -> Timeseries {
        let step = Duration::minutes(range.step_minutes.into());
        let stamp = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
        let mut buckets: BTreeMap<DateTime<Utc>, Bucket> = BTreeMap::new();
        let mut start = range.from;
        while start < range.until {
            let workflows = Outcome::VARIANTS
                .iter()
                .filter_map(|name| name.parse::<Outcome>().ok())
                .map(|o| (<&'static str>::from(o), 0))
                .collect();
            buckets.insert(start, Bucket { start: stamp(start), workflows, ..Bucket::default() });
            start += step;
        }
        for row in rows {
            match row {
                SeriesRow::Outcome { bucket, outcome, workflows } => {
                    if let Some(b) = buckets.get_mut(bucket) {
                        *b.workflows.entry(<&'static str>::from(*outcome)).or_default() += workflows;
                    }
                }
                SeriesRow::Served {
                    bucket,
                    served_provider,
                    attempts,
                    retries,
                    cost_pusd,
                    wasted_cost_pusd,
                    unknown_cost_attempts,
                } => {
                    if let Some(b) = buckets.get_mut(bucket) {
                        b.attempts += attempts;
                        b.retries += retries;
                        b.cost_usd += usd(*cost_pusd);
                        b.wasted_cost_usd += usd(*wasted_cost_pusd);
                        b.unknown_cost_attempts += unknown_cost_attempts;
                        *b.cost_by_served_provider.entry(served_provider.clone()).or_default() +=
                            usd(*cost_pusd);
                        *b.wasted_cost_by_served_provider.entry(served_provider.clone()).or_default() +=
                            usd(*wasted_cost_pusd);
                    }
                }
            }
        }
        Timeseries {
            since: stamp(range.from),
            until: stamp(range.until),
            step_seconds: step.num_seconds(),
            workflow: range.workflow.clone(),
            buckets: buckets.into_values().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn ranges_are_whole_minutes_and_bounded() {
        let r = range(at("2026-11-28T02:00:30Z"), at("2026-11-28T03:00:01Z"), None, None).unwrap();
        assert_eq!(
            (r.from, r.until, r.step_minutes),
            (at("2026-11-28T02:00:00Z"), at("2026-11-28T03:01:00Z"), 1)
        );
        let day = range(at("2026-11-27T00:00:00Z"), at("2026-11-28T00:00:00Z"), None, None).unwrap();
        assert_eq!(day.step_minutes, 6, "1,440 minutes in at most 240 buckets");
        let step = |s| {
            range(
                at("2026-11-27T00:00:00Z"),
                at("2026-11-28T00:00:00Z"),
                Some(std::time::Duration::from_secs(s)),
                None,
            )
        };
        assert!(step(90).unwrap_err().contains("whole number of minutes"));
        assert!(step(30).is_err());
        assert_eq!(step(300).unwrap().step_minutes, 5);
        let year = range(
            at("2025-11-28T00:00:00Z"),
            at("2026-11-28T00:00:00Z"),
            Some(std::time::Duration::from_secs(60)),
            None,
        );
        assert!(year.unwrap_err().contains("at most 10000"));
        assert!(range(at("2026-11-28T00:00:00Z"), at("2026-11-28T00:00:00Z"), None, None).is_err());
    }
}
