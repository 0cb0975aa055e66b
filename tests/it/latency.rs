//! The report's `latency` section: duration percentiles by requested route
//! and status, held against the same percentiles computed from the records
//! themselves, for all time, a window with edges inside minutes, and one
//! workflow name.

use std::collections::BTreeMap;

use attempt_core::ingest::jsonl;
use attempt_core::model::LATENCY_BUCKETS;
use attempt_core::request::ReportFilter;
use attempt_ledger::simulate::{Scenario, SimOptions, default_start, simulate};
use chrono::{DateTime, Duration, Utc};

use crate::{report_of, store_with};

type Key = (String, String, String);

/// (p50, p90, p99) bucket bounds and the mean, per requested route and
/// status, of the attempts of the workflows whose first attempt `selected`.
fn expected(
    lines: &[String],
    selected: impl Fn(DateTime<Utc>, Option<&str>) -> bool,
) -> BTreeMap<Key, (Vec<Option<f64>>, f64)> {
    let attempts = jsonl::decode_lines(&lines.join("\n"), 1).attempts;
    let mut first: BTreeMap<&str, (DateTime<Utc>, Option<&str>)> = BTreeMap::new();
    for a in &attempts {
        let entry = first.entry(a.workflow_id.as_str()).or_insert((a.started_at, a.workflow.as_deref()));
        if a.started_at < entry.0 {
            entry.0 = a.started_at;
        }
    }
    let mut durations: BTreeMap<Key, Vec<f64>> = BTreeMap::new();
    for a in &attempts {
        let (at, name) = first[a.workflow_id.as_str()];
        if let (true, Some(ms)) = (selected(at, name), a.duration_ms) {
            let key = (a.provider.clone(), a.model.clone(), attempt_core::model::name(a.status).to_string());
            durations.entry(key).or_default().push(ms);
        }
    }
    durations
        .into_iter()
        .map(|(key, ms)| {
            let bucket = |ms: f64| LATENCY_BUCKETS.iter().position(|bound| ms / 1000.0 <= *bound);
            let mut counts = vec![0usize; LATENCY_BUCKETS.len() + 1];
            for m in &ms {
                counts[bucket(*m).unwrap_or(LATENCY_BUCKETS.len())] += 1;
            }
            let quantile = |q: f64| {
                let mut upto = 0;
                for (i, n) in counts.iter().enumerate() {
                    upto += n;
                    if upto as f64 >= q * ms.len() as f64 {
                        return LATENCY_BUCKETS.get(i).copied();
                    }
                }
                None
            };
            let mean = ms.iter().sum::<f64>() / ms.len() as f64 / 1000.0;
            (key, (vec![quantile(0.5), quantile(0.9), quantile(0.99)], mean))
        })
        .collect()
}

fn reported(
    filter: &ReportFilter,
    store: &attempt_ledger::store::Store,
) -> BTreeMap<Key, (Vec<Option<f64>>, f64)> {
    report_of(store, filter)
        .latency
        .into_iter()
        .filter(|l| l.metric == "duration")
        .map(|l| {
            (
                (l.provider, l.model, l.status),
                (vec![l.p50_seconds, l.p90_seconds, l.p99_seconds], l.mean_seconds),
            )
        })
        .collect()
}

fn assert_close(got: &BTreeMap<Key, (Vec<Option<f64>>, f64)>, want: &BTreeMap<Key, (Vec<Option<f64>>, f64)>) {
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>());
    for (key, (percentiles, mean)) in want {
        assert_eq!(&got[key].0, percentiles, "{key:?}");
        assert!((got[key].1 - mean).abs() < 1e-6, "{key:?}: {} vs {mean}", got[key].1);
    }
}

#[test]
fn duration_percentiles_are_the_records_own_by_route_window_and_workflow() {
    let mut lines = Vec::new();
    for (scenario, seed) in [(Scenario::RateLimitFallback, 3), (Scenario::NaiveRetries, 4)] {
        let options = SimOptions { scenario, workflows: Some(600), seed, start: default_start(), span: None };
        let mut out = Vec::new();
        simulate(&options, &mut out).unwrap();
        lines.extend(String::from_utf8(out).unwrap().lines().map(str::to_string));
    }
    let store = store_with(&lines);
    assert_close(&reported(&ReportFilter::default(), &store), &expected(&lines, |_, _| true));
    // Edges inside minutes: whole minutes from the rollups, the rest from
    // the per-workflow rows.
    let since = default_start() + Duration::seconds(1_234);
    let until = default_start() + Duration::seconds(4_321);
    let window = ReportFilter { since: Some(since), until: Some(until), ..ReportFilter::default() };
    let in_window = |at: DateTime<Utc>, _: Option<&str>| at >= since && at < until;
    let want = expected(&lines, in_window);
    assert!(want.len() >= 4, "{want:?}");
    assert_close(&reported(&window, &store), &want);
    let name = attempt_core::ingest::jsonl::decode_line(&lines[0]).unwrap().workflow.unwrap();
    let one = ReportFilter { workflow: Some(name.clone()), ..window };
    assert_close(
        &reported(&one, &store),
        &expected(&lines, |at, n| in_window(at, n) && n == Some(name.as_str())),
    );
}
