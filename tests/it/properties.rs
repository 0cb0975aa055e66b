//! Results never depend on arrival order, batching or redelivery: the
//! report, the derived tables, the recovery audit and `tune` (the curve and
//! a replay under every limit).

use attempt_core::ingest::jsonl;
use attempt_core::request::ReportFilter;
use attempt_core::request::Window;
use attempt_ledger::store::{Batch, Store};
use proptest::prelude::*;
use serde_json::json;

use crate::report_of;

const LAYERS: [&str; 4] = ["sdk", "gateway", "app", "queue"];

/// Records of up to four workflows, each a random run of attempts over
/// two routes, with every field the rules read. Workflows start 37 s apart;
/// their attempts are seconds, hours or days apart (late attempts of old
/// workflows, beyond every lookup's time margin).
pub(crate) fn workflows() -> impl Strategy<Value = Vec<String>> {
    (prop::sample::select(vec![1_000_i64, 3_600_000, 172_800_000]), flows())
        .prop_map(|(unit_ms, flows)| records(&flows, unit_ms))
}

type Flow = Vec<(bool, usize, usize, i64, Option<i64>, i64, usize, bool, usize)>;

fn flows() -> impl Strategy<Value = Vec<Flow>> {
    let attempt = (
        any::<bool>(),             // ok?
        0usize..7,                 // decision
        0usize..3,                 // route: same, other model, stated fallback
        0i64..3,                   // seconds offset
        prop::option::of(0i64..5), // attempt index
        0i64..5_000,               // input tokens
        0usize..4,                 // layer
        any::<bool>(),             // emitter cost?
        0usize..6,                 // what the recovery audit looks at (TROUBLE)
    );
    prop::collection::vec(prop::collection::vec(attempt, 1..6), 1..5)
}

fn records(flows: &[Flow], unit_ms: i64) -> Vec<String> {
    {
        let mut lines = Vec::new();
        for (w, attempts) in flows.iter().enumerate() {
            for (n, (ok, decision, route, offset, index, input, layer, cost, trouble)) in
                attempts.iter().enumerate()
            {
                let decisions = [
                    None,
                    Some("retry"),
                    Some("fallback"),
                    Some("queue"),
                    Some("degrade"),
                    Some("fail_closed"),
                    Some("return"),
                ];
                let mut record = json!({
                    "workflow_id": format!("w{w}"),
                    "attempt_id": format!("w{w}-a{n}"),
                    "workflow": if w % 2 == 0 { "even" } else { "odd" },
                    "started_at": 1_795_831_200_000_i64 + w as i64 * 37_000 + (n as i64 + offset) * unit_ms,
                    "provider": "openai",
                    "model": if *route == 1 { "gpt-4.1-mini" } else { "gpt-4o-mini" },
                    "status": if *ok { "ok" } else { "error" },
                        "layer": LAYERS[*layer],
                    "input_tokens": input,
                    "cached_input_tokens": input / 3,
                    "output_tokens": input / 7,
                });
                if let Some(d) = decisions[*decision] {
                    record["decision"] = json!(d);
                }
                if *route == 2 {
                    record["route"] = json!("fallback");
                }
                if let Some(i) = index {
                    record["attempt"] = json!(i);
                }
                // Headroom on most attempts, from the drawn values: remaining
                // 0 often enough that 429s find a kind used up (theirs or the
                // attempt's before), ties in time, and a limit of 0.
                if input % 3 != 0 {
                    record["ratelimit_remaining_requests"] = json!(input % 11);
                    record["ratelimit_limit_requests"] = json!(10);
                }
                if input % 2 == 0 {
                    record["ratelimit_remaining_tokens"] = json!(input % 13 * 100);
                    record["ratelimit_limit_tokens"] = json!(if input % 5 == 0 { 0 } else { 1_200 });
                }
                if *cost {
                    record["cost_usd"] = json!(*input as f64 * 1.1e-7);
                }
                for (key, value) in TROUBLE[*trouble] {
                    if *ok && *key != "commit_state" {
                        continue;
                    }
                    record[*key] = match value.parse::<f64>() {
                        Ok(number) => json!(number),
                        Err(_) => json!(value),
                    };
                }
                lines.push(record.to_string());
            }
        }
        lines
    }
}

/// Fields the recovery audit reads, one set per attempt (the error ones on
/// failures only): a class that must not be retried, a refusal, a timeout
/// with output, a retry-after, a commit.
const TROUBLE: [&[(&str, &str)]; 6] = [
    &[],
    &[("error_class", "quota")],
    &[("error_class", "policy")],
    &[("error_class", "timeout")],
    &[("error_class", "rate_limit"), ("retry_after_ms", "5000")],
    &[("commit_state", "committed")],
];

/// A policy with every limit set low enough for the generated workflows to
/// cross, so every finding of the audit is exercised.
const POLICY: &str = r#"
[default]
fail_closed_on = ["quota"]
max_total_attempts = 2
max_elapsed_ms = 2000
max_extra_cost_usd = 0.0001
approved_fallbacks = ["openai/gpt-4o-mini"]
queue_allowed = false
retry_budget = 0.2
retry_budget_floor = 1
"#;

fn audit_of(store: &Store) -> attempt_ledger::report::audit::Audit {
    let policy = attempt_core::policy::LoadedPolicy {
        file: None,
        set: attempt_core::policy::PolicySet::parse(POLICY, "test").unwrap(),
    };
    let prices = attempt_core::pricing::PriceTable::load(None).unwrap();
    attempt_ledger::report::audit::Audit::of(
        &policy,
        &store.audit(&Window::default().audited_with(&policy.set), &prices).unwrap(),
    )
}

/// A seeded Fisher-Yates shuffle, so a failure reproduces.
fn shuffle(lines: &mut [String], seed: u64) {
    let mut state = seed | 1;
    for i in (1..lines.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        lines.swap(i, (state % (i as u64 + 1)) as usize);
    }
}

fn ingest_in_batches(lines: &[String], batch: usize) -> Store {
    let store = Store::open_in_memory().unwrap();
    for chunk in lines.chunks(batch.max(1)) {
        let decoded = jsonl::decode_lines(&chunk.join("\n"), 1);
        assert!(decoded.rejections.is_empty());
        store.write_batch(&decoded.attempts).unwrap();
    }
    store
}

/// Cases of a property: all of them in the full suite (CI), a sixth in the
/// fast tier (`scripts/test.sh --fast`): the same strategies, fewer draws.
pub(crate) fn cases(full: u32) -> u32 {
    if std::env::var("ATTEMPT_LEDGER_TEST_FAST").as_deref() == Ok("1") { (full / 6).max(4) } else { full }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    #[test]
    fn shuffling_duplicating_and_batching_never_change_the_report(
        lines in workflows(),
        seed in any::<u64>(),
        batch in 1usize..8,
        duplicates in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let fresh = ingest_in_batches(&lines, lines.len());
        let expected = report_of(&fresh, &ReportFilter::default());
        let mut shuffled = lines.clone();
        for index in &duplicates {
            shuffled.push(index.get(&lines).clone());
        }
        shuffle(&mut shuffled, seed);
        let store = ingest_in_batches(&shuffled, batch);
        prop_assert_eq!(store.attempt_count().unwrap(), lines.len() as u64);
        prop_assert_eq!(&report_of(&store, &ReportFilter::default()), &expected);
        prop_assert_eq!(audit_of(&store), audit_of(&fresh), "the recovery audit");
        for set in [&REPLAY[..], &REPLAY[..1], &BY_SHAPE[..], &[]] {
            let tune = crate::tune::tune_of(&store, &ReportFilter::default(), set);
            prop_assert_eq!(&tune, &crate::tune::tune_of(&fresh, &ReportFilter::default(), set), "tune {:?}", set);
            if let Some(replay) = &tune.replay {
                prop_assert_eq!(&replay.before, &expected.workflows, "a replay starts from the report");
            }
        }
        // Decided once per shape from the rollups, or workflow by workflow
        // (a time limit that never binds): the same replay.
        let by_shape = crate::tune::tune_of(&store, &ReportFilter::default(), &BY_SHAPE).replay.unwrap();
        let timed: Vec<&str> = BY_SHAPE.iter().copied().chain(["max_elapsed_ms=1e15"]).collect();
        let mut by_workflow = crate::tune::tune_of(&store, &ReportFilter::default(), &timed).replay.unwrap();
        by_workflow.policy = by_shape.policy.clone();
        prop_assert_eq!(by_shape, by_workflow, "by shape and workflow by workflow");
    }
}

/// Every limit a replay decides once per shape for.
const BY_SHAPE: [&str; 8] = [
    "max_retries.sdk=1",
    "max_retries.app=2",
    "max_route_attempts=3",
    "max_total_attempts=4",
    "no_retry_on=policy",
    "fail_closed_on=quota",
    "fallback_on=rate_limit,timeout,unknown",
    "queue_allowed=false",
];

/// Every replay limit at once, low enough for the generated workflows to
/// cross (the first alone: the retry budget, whose replay couples workflows).
const REPLAY: [&str; 11] = [
    "retry_budget=0.5",
    "max_retries.sdk=1",
    "max_retries.app=2",
    "max_route_attempts=3",
    "max_total_attempts=4",
    "max_elapsed_ms=3000",
    "max_extra_cost_usd=0.001",
    "no_retry_on=policy",
    "fail_closed_on=quota",
    "fallback_on=rate_limit,timeout,unknown",
    "queue_allowed=false",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    /// The facts, rollups and totals a store keeps batch by batch equal
    /// what `rebuild` derives from its attempts, whatever the order,
    /// batching, redeliveries and conflicting copies; and every report,
    /// windowed or not, equals the report of a fresh database given the
    /// same attempts in one batch.
    #[test]
    fn derived_tables_kept_batch_by_batch_equal_a_rebuild(
        lines in workflows(),
        seed in any::<u64>(),
        batch in 1usize..8,
        duplicates in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        conflicts in prop::collection::vec((any::<prop::sample::Index>(), 1i64..3), 0..3),
        since_s in 0i64..400,
        length_s in 1i64..400,
    ) {
        let mut arriving = lines.clone();
        for index in &duplicates {
            arriving.push(index.get(&lines).clone());
        }
        shuffle(&mut arriving, seed);
        let fresh = ingest_in_batches(&lines, lines.len());
        let store = ingest_in_batches(&arriving, batch);
        let since = chrono::DateTime::from_timestamp_millis(1_795_831_200_000 + since_s * 1000).unwrap();
        let filters = [
            ReportFilter::default(),
            ReportFilter { since: Some(since), until: Some(since + chrono::Duration::seconds(length_s)),
                           ..ReportFilter::default() },
            ReportFilter { since: Some(since), ..ReportFilter::default() },
            ReportFilter { workflow: Some("even".into()), ..ReportFilter::default() },
        ];
        for filter in &filters {
            prop_assert_eq!(report_of(&store, filter), report_of(&fresh, filter), "{:?}", filter);
        }
        let kept = store.derived_digest().unwrap();
        prop_assert_eq!(&kept, &fresh.derived_digest().unwrap());
        store.rebuild_derived().unwrap();
        prop_assert_eq!(&kept, &store.derived_digest().unwrap());
        // In several passes of whole workflows, as a large database is.
        store.rebuild_derived_in_parts(3).unwrap();
        prop_assert_eq!(&kept, &store.derived_digest().unwrap());

        // A copy of a stored id with other content, a day or two later:
        // found wherever it lies, counted as a conflict, never stored.
        let conflicting: Vec<String> = conflicts
            .iter()
            .map(|(index, days)| {
                let mut record: serde_json::Value = serde_json::from_str(index.get::<String>(&lines)).unwrap();
                let at = record["started_at"].as_i64().unwrap();
                record["started_at"] = json!(at + days * 86_400_000);
                record["input_tokens"] = json!(123_456);
                record.to_string()
            })
            .collect();
        let decoded = jsonl::decode_lines(&conflicting.join("\n"), 1);
        let stats = store.write_batch(&decoded.attempts).unwrap();
        prop_assert_eq!(stats.inserted, 0);
        prop_assert_eq!(store.derived_digest().unwrap(), kept);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(24), ..ProptestConfig::default() })]

    /// Writes are acknowledged before they are derived. Whatever the order,
    /// batching and redelivery, however the pending writes are cut into
    /// derivation rounds, and wherever the process dies between an
    /// acknowledgement and its derivation (the next open derives what is
    /// pending), the derived tables equal a rebuild's and the report equals
    /// a one-batch ingest's.
    #[test]
    fn derivation_after_the_acknowledgement_in_any_rounds_and_crashes_equals_one_batch(
        lines in workflows(),
        seed in any::<u64>(),
        batch in 1usize..6,
        duplicates in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        rounds in prop::collection::vec((0u64..3, 1u64..12), 1..12),
        crash_after in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let mut arriving = lines.clone();
        for index in &duplicates {
            arriving.push(index.get(&lines).clone());
        }
        shuffle(&mut arriving, seed);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.duckdb");
        let mut store = Store::open(&path).unwrap();
        let chunks: Vec<&[String]> = arriving.chunks(batch).collect();
        let crash_after = crash_after.map(|i| i.index(chunks.len()));
        for (i, chunk) in chunks.iter().enumerate() {
            let decoded = jsonl::decode_lines(&chunk.join("\n"), 1);
            store.store_batches(&[Batch { attempts: &decoded.attempts, ..Batch::default() }]).unwrap();
            // After each write, some rounds of some size (or none).
            let (count, max_rows) = rounds[i % rounds.len()];
            for _ in 0..count {
                store.derive_round(max_rows).unwrap();
            }
            if crash_after == Some(i) {
                drop(store);
                store = Store::open(&path).unwrap();
                prop_assert!(store.pending().unwrap().is_empty(), "the open derived what was pending");
            }
        }
        store.catch_up().unwrap();
        let fresh = ingest_in_batches(&lines, lines.len());
        prop_assert_eq!(report_of(&store, &ReportFilter::default()), report_of(&fresh, &ReportFilter::default()));
        let kept = store.derived_digest().unwrap();
        prop_assert_eq!(&kept, &fresh.derived_digest().unwrap());
        store.rebuild_derived().unwrap();
        prop_assert_eq!(&kept, &store.derived_digest().unwrap());
    }
}
