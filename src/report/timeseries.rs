//! The charts' data: `GET /api/v1/timeseries`, every bucket of the range
//! (empty ones as zeros, so a chart's x axis is the range): workflows by
//! outcome; attempts and cost by who was asked, who served and which layer
//! sent them; the retry ratio per bucket; latency percentiles.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde::{Serialize, Serializer};
use strum::VariantNames;

use super::{usd, whole_number};
use crate::store::queries::SeriesRow;
use attempt_core::model::Outcome;
use attempt_core::request::SeriesRange;

/// Keys one breakdown (providers, models) keeps: those with the most cost
/// over the range, then the most attempts; the rest are summed under
/// `OTHER_KEY`. Bounds an answer at buckets x keys whatever the providers.
pub const MAX_SERIES_KEYS: usize = 12;
pub const OTHER_KEY: &str = "(other)";
/// The percentiles of the latency summaries.
pub const QUANTILES: [(&str, f64); 3] = [("p50", 0.50), ("p95", 0.95), ("p99", 0.99)];

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timeseries {
    pub since: String,
    pub until: String,
    pub step_seconds: i64,
    pub workflow: Option<String>,
    pub route: Option<String>,
    pub buckets: Vec<Bucket>,
    /// Latency and TTFT over the whole range, by metric (`duration`, `ttft`).
    pub latency: BTreeMap<String, LatencySummary>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Bucket {
    pub start: String,
    /// Workflows whose first attempt started in the bucket, by outcome
    /// (every outcome, zeros included).
    pub workflows: BTreeMap<&'static str, i64>,
    /// Attempts of those workflows, and those whose answer was not delivered.
    pub attempts: i64,
    pub wasted_attempts: i64,
    /// First attempts and retries that started in the bucket, and their
    /// ratio (`null` with no first attempt): the retry budget's measure.
    pub first_attempts: i64,
    pub retries: i64,
    pub retry_ratio: Option<f64>,
    /// Known cost; attempts of unknown cost are counted apart.
    pub cost_usd: f64,
    pub wasted_cost_usd: f64,
    /// Input + output tokens of attempts not delivered.
    #[serde(serialize_with = "whole_number")]
    pub wasted_tokens: i128,
    pub unknown_cost_attempts: i64,
    pub cost_by_served_provider: BTreeMap<String, f64>,
    pub wasted_cost_by_served_provider: BTreeMap<String, f64>,
    /// The same cost charged to the provider that was asked: where it
    /// differs from the served one, a gateway rerouted or a fallback served.
    pub cost_by_requested_provider: BTreeMap<String, f64>,
    /// By `served_provider/served_model`.
    pub cost_by_served_model: BTreeMap<String, f64>,
    pub attempts_by_layer: BTreeMap<&'static str, i64>,
    /// By metric; `duration` and `ttft` when observed.
    pub latency: BTreeMap<String, LatencySummary>,
    /// By `served_provider/served_model` (the routes of
    /// `cost_by_served_model`, the rest as `(other)`): the lowest
    /// remaining / limit of any kind stated by a response to an attempt
    /// started in the bucket; absent where none stated one.
    pub headroom_min_ratio: BTreeMap<String, f64>,
    /// 429s that started in the bucket, by the limit they hit.
    pub rate_limited: BTreeMap<String, i64>,
}

/// Percentiles from the stored histogram: each is the upper bound of the
/// histogram bucket holding that percentile (so "p99 <= 2.5 s" is exact,
/// where interpolation would invent a figure); `+Inf` above the last bound.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct LatencySummary {
    pub observations: i64,
    pub p50_le_seconds: Option<Bound>,
    pub p95_le_seconds: Option<Bound>,
    pub p99_le_seconds: Option<Bound>,
}

/// A histogram bound: seconds, or above the last one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    Seconds(f64),
    Above,
}

impl Serialize for Bound {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Bound::Seconds(v) => s.serialize_f64(*v),
            // Prometheus' spelling; JSON has no infinity.
            Bound::Above => s.serialize_str("+Inf"),
        }
    }
}

/// Non-cumulative histogram counts by bound (`None`: above the last).
#[derive(Debug, Clone, Default)]
struct Histogram(BTreeMap<BoundKey, i64>);

/// Orders bounds with "above the last" at the end.
#[derive(Debug, Clone, Copy, PartialEq)]
struct BoundKey(f64);

impl Eq for BoundKey {}
impl Ord for BoundKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}
impl PartialOrd for BoundKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Histogram {
    fn add(&mut self, le: Option<f64>, observations: i64) {
        *self.0.entry(BoundKey(le.unwrap_or(f64::INFINITY))).or_default() += observations;
    }

    /// The smallest bound below which at least `q` of the observations lie.
    fn quantile(&self, q: f64) -> Option<Bound> {
        let total: i64 = self.0.values().sum();
        if total <= 0 {
            return None;
        }
        // Integer rank: the ceil(q * total)-th observation.
        let rank = ((q * total as f64).ceil() as i64).clamp(1, total);
        let mut seen = 0;
        for (bound, count) in &self.0 {
            seen += count;
            if seen >= rank {
                return Some(if bound.0.is_finite() { Bound::Seconds(bound.0) } else { Bound::Above });
            }
        }
        None
    }

    fn summary(&self) -> LatencySummary {
        let q = |i: usize| self.quantile(QUANTILES[i].1);
        LatencySummary {
            observations: self.0.values().sum(),
            p50_le_seconds: q(0),
            p95_le_seconds: q(1),
            p99_le_seconds: q(2),
        }
    }
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
        let kept = KeptKeys::of(rows);
        let mut histograms: BTreeMap<DateTime<Utc>, BTreeMap<String, Histogram>> = BTreeMap::new();
        let mut whole_range: BTreeMap<String, Histogram> = BTreeMap::new();
        for row in rows {
            match row {
                SeriesRow::Outcome { bucket, outcome, workflows } => {
                    if let Some(b) = buckets.get_mut(bucket) {
                        *b.workflows.entry(<&'static str>::from(*outcome)).or_default() += workflows;
                    }
                }
                SeriesRow::Spend {
                    bucket,
                    provider,
                    served_provider,
                    served_model,
                    layer,
                    attempts,
                    wasted_attempts,
                    cost_pusd,
                    wasted_cost_pusd,
                    wasted_tokens,
                    unknown_cost_attempts,
                } => {
                    let Some(b) = buckets.get_mut(bucket) else { continue };
                    b.attempts += attempts;
                    b.wasted_attempts += wasted_attempts;
                    b.cost_usd += usd(*cost_pusd);
                    b.wasted_cost_usd += usd(*wasted_cost_pusd);
                    b.wasted_tokens += wasted_tokens;
                    b.unknown_cost_attempts += unknown_cost_attempts;
                    let served = kept.provider(served_provider);
                    *b.cost_by_served_provider.entry(served.clone()).or_default() += usd(*cost_pusd);
                    *b.wasted_cost_by_served_provider.entry(served).or_default() += usd(*wasted_cost_pusd);
                    *b.cost_by_requested_provider.entry(kept.provider(provider)).or_default() +=
                        usd(*cost_pusd);
                    *b.cost_by_served_model.entry(kept.model(served_provider, served_model)).or_default() +=
                        usd(*cost_pusd);
                    *b.attempts_by_layer.entry(<&'static str>::from(*layer)).or_default() += attempts;
                }
                SeriesRow::Retry { bucket, first_attempts, retries } => {
                    if let Some(b) = buckets.get_mut(bucket) {
                        b.first_attempts += first_attempts;
                        b.retries += retries;
                    }
                }
                SeriesRow::Headroom { bucket, served_provider, served_model, min_ratio } => {
                    if let Some(b) = buckets.get_mut(bucket) {
                        b.headroom_min_ratio
                            .entry(kept.model(served_provider, served_model))
                            .and_modify(|lowest| *lowest = lowest.min(*min_ratio))
                            .or_insert(*min_ratio);
                    }
                }
                SeriesRow::RateLimit { bucket, kind, attempts } => {
                    if let Some(b) = buckets.get_mut(bucket) {
                        *b.rate_limited.entry(kind.clone()).or_default() += attempts;
                    }
                }
                SeriesRow::Latency { bucket, metric, le, observations } => {
                    if buckets.contains_key(bucket) {
                        histograms
                            .entry(*bucket)
                            .or_default()
                            .entry(metric.clone())
                            .or_default()
                            .add(*le, *observations);
                        whole_range.entry(metric.clone()).or_default().add(*le, *observations);
                    }
                }
            }
        }
        for (start, bucket) in buckets.iter_mut() {
            bucket.retry_ratio =
                (bucket.first_attempts > 0).then(|| bucket.retries as f64 / bucket.first_attempts as f64);
            if let Some(metrics) = histograms.get(start) {
                bucket.latency = metrics.iter().map(|(m, h)| (m.clone(), h.summary())).collect();
            }
        }
        Timeseries {
            since: stamp(range.from),
            until: stamp(range.until),
            step_seconds: step.num_seconds(),
            workflow: range.workflow.clone(),
            route: range.route.clone(),
            buckets: buckets.into_values().collect(),
            latency: whole_range.iter().map(|(m, h)| (m.clone(), h.summary())).collect(),
        }
    }
}

/// The providers and served models a breakdown names (`MAX_SERIES_KEYS`).
struct KeptKeys {
    providers: Vec<String>,
    models: Vec<String>,
}

impl KeptKeys {
    fn of(rows: &[SeriesRow]) -> KeptKeys {
        let mut providers: BTreeMap<String, (i128, i64)> = BTreeMap::new();
        let mut models: BTreeMap<String, (i128, i64)> = BTreeMap::new();
        for row in rows {
            if let SeriesRow::Spend { provider, served_provider, served_model, attempts, cost_pusd, .. } = row
            {
                for key in [provider, served_provider] {
                    let entry = providers.entry(key.clone()).or_default();
                    *entry = (entry.0 + cost_pusd, entry.1 + attempts);
                }
                let entry = models.entry(format!("{served_provider}/{served_model}")).or_default();
                *entry = (entry.0 + cost_pusd, entry.1 + attempts);
            }
        }
        let top = |totals: BTreeMap<String, (i128, i64)>| {
            let mut ranked: Vec<_> = totals.into_iter().collect();
            // Most cost, then most attempts, then by name: stable answers.
            ranked.sort_by(|(a, x), (b, y)| y.cmp(x).then_with(|| a.cmp(b)));
            ranked.into_iter().take(MAX_SERIES_KEYS).map(|(k, _)| k).collect()
        };
        KeptKeys { providers: top(providers), models: top(models) }
    }

    fn provider(&self, name: &str) -> String {
        if self.providers.iter().any(|p| p == name) { name.to_string() } else { OTHER_KEY.to_string() }
    }

    fn model(&self, provider: &str, model: &str) -> String {
        let key = format!("{provider}/{model}");
        if self.models.contains(&key) { key } else { OTHER_KEY.to_string() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn percentiles_are_the_bounds_of_the_buckets_holding_them() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile(0.5), None);
        h.add(Some(0.1), 50);
        h.add(Some(1.0), 45);
        h.add(Some(2.5), 4);
        h.add(None, 1);
        assert_eq!(h.quantile(0.50), Some(Bound::Seconds(0.1)), "the 50th of 100 is in the first bucket");
        assert_eq!(h.quantile(0.51), Some(Bound::Seconds(1.0)));
        assert_eq!(h.quantile(0.95), Some(Bound::Seconds(1.0)));
        assert_eq!(h.quantile(0.99), Some(Bound::Seconds(2.5)));
        assert_eq!(h.quantile(1.0), Some(Bound::Above));
        assert_eq!(serde_json::to_string(&Bound::Above).unwrap(), "\"+Inf\"");
    }

    #[test]
    fn breakdowns_keep_the_costliest_keys_and_sum_the_rest() {
        let at0 = at("2026-11-28T00:00:00Z");
        let spend = |provider: &str, cost: i128| SeriesRow::Spend {
            bucket: at0,
            provider: provider.to_string(),
            served_provider: provider.to_string(),
            served_model: "m".to_string(),
            layer: attempt_core::model::Layer::Sdk,
            attempts: 1,
            wasted_attempts: 0,
            cost_pusd: cost,
            wasted_cost_pusd: 0,
            wasted_tokens: 0,
            unknown_cost_attempts: 0,
        };
        let rows: Vec<_> = (0..20).map(|i| spend(&format!("p{i:02}"), i128::from(i) * 1_000_000)).collect();
        let r = SeriesRange::new(at0, at("2026-11-28T00:01:00Z"), None, None, None).unwrap();
        let series = Timeseries::from_rows(&r, &rows);
        let by = &series.buckets[0].cost_by_served_provider;
        assert_eq!(by.len(), MAX_SERIES_KEYS + 1);
        assert!(by.contains_key("p19") && !by.contains_key("p07"));
        let other: f64 = (0..8).map(|i| i as f64 * 1e-6).sum();
        assert!((by[OTHER_KEY] - other).abs() < 1e-12);
        let total: f64 = by.values().sum();
        assert!((total - series.buckets[0].cost_usd).abs() < 1e-12, "folding keeps every dollar");
    }
}
