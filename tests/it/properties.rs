//! Results never depend on arrival order, batching or redelivery.

use attempt_ledger::ingest::jsonl;
use attempt_ledger::store::{ReportFilter, Store};
use proptest::prelude::*;
use serde_json::json;

use crate::report_of;

const LAYERS: [&str; 4] = ["sdk", "gateway", "app", "queue"];

/// Records of up to four workflows, each a random run of attempts over
/// two routes, with every field the rules read.
fn workflows() -> impl Strategy<Value = Vec<String>> {
    let attempt = (
        any::<bool>(),             // ok?
        0usize..7,                 // decision
        0usize..3,                 // route: same, other model, stated fallback
        0i64..3,                   // seconds offset
        prop::option::of(0i64..5), // attempt index
        0i64..5_000,               // input tokens
        0usize..4,                 // layer
        any::<bool>(),             // emitter cost?
    );
    prop::collection::vec(prop::collection::vec(attempt, 1..6), 1..5).prop_map(|flows| {
        let mut lines = Vec::new();
        for (w, attempts) in flows.iter().enumerate() {
            for (n, (ok, decision, route, offset, index, input, layer, cost)) in attempts.iter().enumerate() {
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
                    "started_at": 1_795_831_200_000_i64 + (n as i64 + offset) * 1000,
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
                if *cost {
                    record["cost_usd"] = json!(*input as f64 * 1.1e-7);
                }
                lines.push(record.to_string());
            }
        }
        lines
    })
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn shuffling_duplicating_and_batching_never_change_the_report(
        lines in workflows(),
        seed in any::<u64>(),
        batch in 1usize..8,
        duplicates in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let expected = report_of(&ingest_in_batches(&lines, lines.len()), &ReportFilter::default());
        let mut shuffled = lines.clone();
        for index in &duplicates {
            shuffled.push(index.get(&lines).clone());
        }
        // A seeded Fisher-Yates shuffle, so a failure reproduces.
        let mut state = seed | 1;
        for i in (1..shuffled.len()).rev() {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17;
            shuffled.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let store = ingest_in_batches(&shuffled, batch);
        prop_assert_eq!(store.attempt_count().unwrap(), lines.len() as u64);
        prop_assert_eq!(report_of(&store, &ReportFilter::default()), expected);
    }
}
