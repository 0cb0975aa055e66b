//! `GET /metrics`: the exposition in the OpenMetrics text format, which
//! Prometheus scrapes. Two halves meet here:
//!
//! - stored-data families, derived from the database by `queries/metrics.sql`
//!   over the same scope as the report, so their counters agree with it; a
//!   late attempt that changes an outcome changes the `workflows` gauge, never
//!   a counter's history of what was stored;
//! - the service's own health, which the service hands in as plain samples.
//!
//! Label cardinality is bounded by design: workflow *names*, routes, layers,
//! classes and outcomes are labels; a `workflow_id` never is.

use std::collections::BTreeMap;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::store::queries::{METRIC_LABEL_COLUMNS, MetricRow};
use crate::telemetry::{PREFIX, escape};
use attempt_core::model::{LATENCY_BUCKETS, PicoUsd};

/// The media type of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// How a stored family's `value` column is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Count,
    /// pico-USD in the database, USD in the exposition.
    PicoUsd,
}

/// A stored-data family: `key` is its `family` value in `metrics.sql`.
struct StoredFamily {
    key: &'static str,
    name: &'static str,
    kind: Kind,
    unit: Unit,
    help: &'static str,
    /// (exposed label name, column of `metrics.sql`)
    labels: &'static [(&'static str, &'static str)],
}

const ROUTE: [(&str, &str); 2] = [("provider", "provider"), ("model", "model")];
const SERVED_ROUTE: [(&str, &str); 2] = [("served_provider", "served_provider"), ("served_model", "model")];
const RATELIMIT_LABELS: [(&str, &str); 3] = [SERVED_ROUTE[0], SERVED_ROUTE[1], ("kind", "limit_kind")];

const STORED: &[StoredFamily] = &[
    StoredFamily {
        key: "attempts",
        name: "attempts",
        kind: Kind::Counter,
        unit: Unit::Count,
        help: "Network attempts stored, by workflow name, layer, requested route, served provider and status.",
        labels: &[
            ("workflow", "workflow"),
            ("layer", "layer"),
            ROUTE[0],
            ROUTE[1],
            ("served_provider", "served_provider"),
            ("status", "status"),
        ],
    },
    StoredFamily {
        key: "attempt_errors",
        name: "attempt_errors",
        kind: Kind::Counter,
        unit: Unit::Count,
        help: "Failed attempts by error class (who owns the failure) and requested route.",
        labels: &[("workflow", "workflow"), ROUTE[0], ROUTE[1], ("error_class", "error_class")],
    },
    StoredFamily {
        key: "wasted_attempts",
        name: "wasted_attempts",
        kind: Kind::Counter,
        unit: Unit::Count,
        help: "Attempts that were not a workflow's delivered answer.",
        labels: &[("workflow", "workflow"), ("served_provider", "served_provider")],
    },
    StoredFamily {
        key: "retries",
        name: "retries",
        kind: Kind::Counter,
        unit: Unit::Count,
        help: "Attempts that were not their workflow's first, by the layer that made them. \
               Retry ratio = rate(retries) / rate(workflows_started).",
        labels: &[("workflow", "workflow"), ("layer", "layer")],
    },
    StoredFamily {
        key: "workflows_started",
        name: "workflows_started",
        kind: Kind::Counter,
        unit: Unit::Count,
        help: "Workflows seen (one first attempt each).",
        labels: &[("workflow", "workflow")],
    },
    StoredFamily {
        key: "workflows",
        name: "workflows",
        kind: Kind::Gauge,
        unit: Unit::Count,
        help: "Workflows by current outcome; a gauge because a late attempt moves a workflow \
               from in_flight to its final outcome.",
        labels: &[("workflow", "workflow"), ("outcome", "outcome")],
    },
    StoredFamily {
        key: "fallback_activations",
        name: "fallback_activations",
        kind: Kind::Counter,
        unit: Unit::Count,
        help: "Workflows that sent an attempt to a route other than their primary, by primary \
               and first fallback route, and the error class that led to it.",
        labels: &[
            ("workflow", "workflow"),
            ("primary_provider", "provider"),
            ("primary_model", "model"),
            ("fallback_provider", "fallback_provider"),
            ("fallback_model", "fallback_model"),
            ("reason", "reason"),
        ],
    },
    StoredFamily {
        key: "route_workflows",
        name: "route_workflows",
        kind: Kind::Gauge,
        unit: Unit::Count,
        help: "Workflows by primary route and current outcome: primary success per route is \
               outcome=\"primary_success\" over the terminal outcomes (not queued or in_flight).",
        labels: &[("primary_provider", "provider"), ("primary_model", "model"), ("outcome", "outcome")],
    },
    StoredFamily {
        key: "tokens",
        name: "tokens",
        kind: Kind::Counter,
        unit: Unit::Count,
        help: "Tokens billed or reported, by served provider and type: input (counts cached_input and \
               cache_write_input), output (counts reasoning_output), cached_input, cache_write_input, \
               reasoning_output.",
        labels: &[("served_provider", "served_provider"), ("type", "token_type")],
    },
    StoredFamily {
        key: "wasted_tokens",
        name: "wasted_tokens",
        kind: Kind::Counter,
        unit: Unit::Count,
        help: "Tokens of attempts that were not the delivered answer, by served provider and type.",
        labels: &[("served_provider", "served_provider"), ("type", "token_type")],
    },
    StoredFamily {
        key: "cost",
        name: "cost_usd",
        kind: Kind::Counter,
        unit: Unit::PicoUsd,
        help: "Known cost in USD, charged to the provider that served the attempt.",
        labels: &[("served_provider", "served_provider")],
    },
    StoredFamily {
        key: "wasted_cost",
        name: "wasted_cost_usd",
        kind: Kind::Counter,
        unit: Unit::PicoUsd,
        help: "Known cost in USD of attempts that were not the delivered answer.",
        labels: &[("served_provider", "served_provider")],
    },
    StoredFamily {
        key: "unknown_cost_attempts",
        name: "unknown_cost_attempts",
        kind: Kind::Counter,
        unit: Unit::Count,
        help: "Attempts whose cost is unknown (served model not in the price table); never priced 0.",
        labels: &[("served_provider", "served_provider")],
    },
    StoredFamily {
        key: "orphan_attempt_spans",
        name: "orphan_attempt_spans",
        kind: Kind::Gauge,
        unit: Unit::Count,
        help: "HTTP client spans in traces with model calls whose own model span never arrived (an \
               emitter lost it, or it has not arrived yet): network attempts no call accounts for.",
        labels: &[],
    },
    StoredFamily {
        key: "ambiguous_calls",
        name: "ambiguous_calls",
        kind: Kind::Gauge,
        unit: Unit::Count,
        help: "Model calls whose neighbouring HTTP spans could belong to another call as well: each \
               counted as one attempt, its own span.",
        labels: &[],
    },
    StoredFamily {
        key: "served_attempts",
        name: "served_attempts",
        kind: Kind::Counter,
        unit: Unit::Count,
        help: "Attempts by the provider and model that served them: the denominator of \
               served_attempt_errors' error rate.",
        labels: &SERVED_ROUTE,
    },
    StoredFamily {
        key: "served_attempt_errors",
        name: "served_attempt_errors",
        kind: Kind::Counter,
        unit: Unit::Count,
        help: "Failed attempts by the provider and model that served them and error class: \
               rate(served_attempt_errors) / rate(served_attempts) is the error rate by type, provider and model.",
        labels: &[SERVED_ROUTE[0], SERVED_ROUTE[1], ("error_class", "error_class")],
    },
    StoredFamily {
        key: "ratelimit_remaining",
        name: "ratelimit_remaining",
        kind: Kind::Gauge,
        unit: Unit::Count,
        help: "What the provider's latest response said remained of a rate limit, by served route and \
               kind (requests, tokens, input_tokens, output_tokens), summed over billing accounts.",
        labels: &RATELIMIT_LABELS,
    },
    StoredFamily {
        key: "ratelimit_limit",
        name: "ratelimit_limit",
        kind: Kind::Gauge,
        unit: Unit::Count,
        help: "The rate limit the provider's latest response stated, by served route and kind, summed \
               over billing accounts.",
        labels: &RATELIMIT_LABELS,
    },
    StoredFamily {
        key: "circuit_state",
        name: "circuit_state",
        kind: Kind::Gauge,
        unit: Unit::Count,
        help: "Each route's breaker as its latest state change left it: 0 closed, 1 half-open, 2 open; by \
               route (provider and model, or route group) and caller (workflow; empty: every caller). The \
               200 routes changed most recently.",
        labels: &[
            ("provider", "provider"),
            ("model", "model"),
            ("route_group", "route_group"),
            ("workflow", "workflow"),
        ],
    },
    StoredFamily {
        key: "attempt_duration_seconds",
        name: "attempt_duration_seconds",
        kind: Kind::Histogram,
        unit: Unit::Count,
        help: "Attempt duration, send to last byte or to the failure, by requested route and status.",
        labels: &[ROUTE[0], ROUTE[1], ("status", "status")],
    },
    StoredFamily {
        key: "time_to_first_token_seconds",
        name: "time_to_first_token_seconds",
        kind: Kind::Histogram,
        unit: Unit::Count,
        help: "Time to first token of streamed attempts, by requested route.",
        labels: &[ROUTE[0], ROUTE[1]],
    },
];

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Counter(f64),
    Gauge(f64),
    Histogram { sum: f64, count: u64, buckets: Vec<(f64, u64)> },
}

#[derive(Debug, Clone, PartialEq)]
struct Series {
    labels: Vec<(String, String)>,
    value: Value,
}

/// One family, ready to encode.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    name: String,
    help: String,
    kind: Kind,
    series: Vec<Series>,
}

impl Family {
    pub fn new(name: impl Into<String>, help: impl Into<String>, kind: Kind) -> Self {
        Family { name: name.into(), help: help.into(), kind, series: Vec::new() }
    }

    /// Adds a counter or gauge sample (by the family's kind).
    pub fn sample(mut self, labels: &[(&str, &str)], value: f64) -> Self {
        let value = match self.kind {
            Kind::Gauge => Value::Gauge(value),
            _ => Value::Counter(value),
        };
        self.series.push(Series { labels: owned(labels), value });
        self
    }
}

fn owned(labels: &[(&str, &str)]) -> Vec<(String, String)> {
    labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Families computed from `metrics.sql` rows. Rows of families this binary
/// does not know are a query bug and are left out rather than guessed at.
pub fn stored_families(rows: &[MetricRow]) -> Vec<Family> {
    let mut families = stored(rows);
    families.push(headroom_ratio(&families));
    families
}

/// remaining / limit of every series with a limit above 0: a limit of 0 or
/// none states no headroom (never 0 %).
fn headroom_ratio(families: &[Family]) -> Family {
    let series_of = |name: &str| families.iter().find(|f| f.name == name).map_or(&[][..], |f| &f.series[..]);
    let remaining = series_of("ratelimit_remaining");
    let series = series_of("ratelimit_limit")
        .iter()
        .filter_map(|limit| {
            let Value::Gauge(limit_value) = limit.value else { return None };
            let left = remaining.iter().find(|r| r.labels == limit.labels)?;
            let Value::Gauge(left_value) = left.value else { return None };
            (limit_value > 0.0).then(|| Series {
                labels: limit.labels.clone(),
                value: Value::Gauge(left_value / limit_value),
            })
        })
        .collect();
    Family {
        name: "ratelimit_headroom_ratio".into(),
        help: "remaining / limit of a rate limit as the provider's latest response stated it, by served \
               route and kind: alert before it reaches 0 and the 429s begin."
            .into(),
        kind: Kind::Gauge,
        series,
    }
}

fn stored(rows: &[MetricRow]) -> Vec<Family> {
    STORED
        .iter()
        .map(|spec| {
            let mine = rows.iter().filter(|r| r.family == spec.key);
            let series = match spec.kind {
                Kind::Histogram => histogram_series(spec, mine),
                _ => mine
                    .map(|row| {
                        let v = match spec.unit {
                            Unit::Count => row.value as f64,
                            Unit::PicoUsd => row.value as f64 / PicoUsd::PER_USD,
                        };
                        Series {
                            labels: labels_of(spec, row),
                            value: if spec.kind == Kind::Gauge { Value::Gauge(v) } else { Value::Counter(v) },
                        }
                    })
                    .collect(),
            };
            Family { name: spec.name.to_string(), help: spec.help.to_string(), kind: spec.kind, series }
        })
        .collect()
}

fn labels_of(spec: &StoredFamily, row: &MetricRow) -> Vec<(String, String)> {
    spec.labels
        .iter()
        .map(|(label, column)| {
            let index = METRIC_LABEL_COLUMNS.iter().position(|c| c == column);
            // An absent value (an unnamed workflow) is the empty string: in
            // Prometheus an empty label equals no label.
            let value = index.and_then(|i| row.labels[i].clone()).unwrap_or_default();
            (label.to_string(), value)
        })
        .collect()
}

fn histogram_series<'a>(spec: &StoredFamily, rows: impl Iterator<Item = &'a MetricRow>) -> Vec<Series> {
    // label values -> (count per bucket index, +Inf count, sum)
    type Counts = (Vec<u64>, u64, f64);
    let mut by_labels: BTreeMap<Vec<(String, String)>, Counts> = BTreeMap::new();
    for row in rows {
        let entry =
            by_labels.entry(labels_of(spec, row)).or_insert_with(|| (vec![0; LATENCY_BUCKETS.len()], 0, 0.0));
        let count = u64::try_from(row.value).unwrap_or(0);
        match row.le.and_then(|le| LATENCY_BUCKETS.iter().position(|b| *b == le)) {
            Some(i) => entry.0[i] += count,
            None => entry.1 += count,
        }
        entry.2 += row.seconds.unwrap_or(0.0);
    }
    by_labels
        .into_iter()
        .map(|(labels, (per_bucket, above, sum))| {
            let mut buckets: Vec<(f64, u64)> = LATENCY_BUCKETS.iter().copied().zip(per_bucket).collect();
            // prometheus-client writes `le="+Inf"` for f64::MAX.
            buckets.push((f64::MAX, above));
            let count = buckets.iter().map(|b| b.1).sum();
            Series { labels, value: Value::Histogram { sum, count, buckets } }
        })
        .collect()
}

#[derive(Debug)]
struct Families(Vec<Family>);

impl Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for family in &self.0 {
            let metric_type = match family.kind {
                Kind::Counter => MetricType::Counter,
                Kind::Gauge => MetricType::Gauge,
                Kind::Histogram => MetricType::Histogram,
            };
            let mut metric = encoder.encode_descriptor(&family.name, &family.help, None, metric_type)?;
            for series in &family.series {
                let labels: Vec<(String, String)> =
                    series.labels.iter().map(|(k, v)| (k.clone(), escape(v))).collect();
                let mut sample = metric.encode_family(&labels)?;
                match &series.value {
                    Value::Counter(v) => sample.encode_counter::<NoLabelSet, _, f64>(v, None)?,
                    Value::Gauge(v) => sample.encode_gauge(v)?,
                    Value::Histogram { sum, count, buckets } => {
                        sample.encode_histogram::<NoLabelSet>(*sum, *count, buckets, None)?
                    }
                }
            }
        }
        Ok(())
    }
}

/// The whole exposition under `attempt_ledger_`: the service's own
/// telemetry (`telemetry::registry`), then `families` (the gauges read at
/// scrape time and the stored-data ones), then `# EOF`.
pub fn exposition(families: Vec<Family>) -> String {
    let mut scraped = Registry::with_prefix(PREFIX);
    scraped.register_collector(Box::new(Families(families)));
    let mut out = String::new();
    // Writing into a String cannot fail; an encoder error would be a bug in
    // the families above, and an empty body tells the scraper.
    let written = prometheus_client::encoding::text::encode_registry(&mut out, crate::telemetry::registry())
        .and_then(|_| prometheus_client::encoding::text::encode(&mut out, &scraped));
    if written.is_err() {
        tracing::error!("metrics encoding failed");
        out.clear();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(family: &str, labels: &[(&str, &str)], le: Option<f64>, value: i128, seconds: f64) -> MetricRow {
        let mut all: [Option<String>; METRIC_LABEL_COLUMNS.len()] = Default::default();
        for (column, v) in labels {
            let i = METRIC_LABEL_COLUMNS.iter().position(|c| c == column).unwrap();
            all[i] = Some(v.to_string());
        }
        MetricRow { family: family.into(), labels: all, le, value, seconds: Some(seconds) }
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_end_at_inf() {
        let rows = [
            row("attempt_duration_seconds", &[("provider", "openai"), ("status", "ok")], Some(0.5), 2, 0.7),
            row("attempt_duration_seconds", &[("provider", "openai"), ("status", "ok")], Some(5.0), 1, 3.0),
            row("attempt_duration_seconds", &[("provider", "openai"), ("status", "ok")], None, 1, 400.0),
        ];
        let text = exposition(stored_families(&rows));
        let line = |needle: &str| {
            text.lines().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle}\n{text}"))
        };
        assert!(line("le=\"0.25\"").ends_with(" 0"));
        assert!(line("le=\"0.5\"").ends_with(" 2"));
        assert!(line("le=\"5.0\"").ends_with(" 3"));
        assert!(line("le=\"+Inf\"").ends_with(" 4"));
        assert!(line("attempt_duration_seconds_count").ends_with(" 4"));
        assert!(line("attempt_duration_seconds_sum").ends_with(" 403.7"));
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn label_values_are_escaped_and_money_is_in_dollars() {
        let rows = [
            row("wasted_cost", &[("served_provider", "a\"b\\c\nd")], None, 1_500_000_000_000, 0.0),
            row("workflows", &[("outcome", "in_flight")], None, 3, 0.0),
        ];
        let text = exposition(stored_families(&rows));
        assert!(
            text.contains(r#"attempt_ledger_wasted_cost_usd_total{served_provider="a\"b\\c\nd"} 1.5"#),
            "{text}"
        );
        assert!(text.contains(r#"attempt_ledger_workflows{workflow="",outcome="in_flight"} 3"#), "{text}");
    }

    #[test]
    fn headroom_is_remaining_over_a_stated_limit_above_zero() {
        let route = |kind| [("served_provider", "openai"), ("model", "gpt-4o"), ("limit_kind", kind)];
        let rows = [
            row("ratelimit_remaining", &route("requests"), None, 5, 0.0),
            row("ratelimit_limit", &route("requests"), None, 100, 0.0),
            row("ratelimit_remaining", &route("tokens"), None, 0, 0.0),
            row("ratelimit_limit", &route("tokens"), None, 0, 0.0),
            row("ratelimit_remaining", &route("input_tokens"), None, 7, 0.0),
        ];
        let text = exposition(stored_families(&rows));
        assert!(
            text.contains(
                r#"attempt_ledger_ratelimit_headroom_ratio{served_provider="openai",served_model="gpt-4o",kind="requests"} 0.05"#
            ),
            "{text}"
        );
        // A limit of 0, or none stated, is no headroom rather than 0 %.
        assert!(!text.contains(
            r#"ratelimit_headroom_ratio{served_provider="openai",served_model="gpt-4o",kind="tokens"}"#
        ));
        assert!(!text.contains(
            r#"ratelimit_headroom_ratio{served_provider="openai",served_model="gpt-4o",kind="input_tokens"}"#
        ));
        assert!(text.contains(r#"attempt_ledger_ratelimit_remaining{served_provider="openai",served_model="gpt-4o",kind="input_tokens"} 7"#));
    }
}
