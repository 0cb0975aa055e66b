//! A lake answers as one node that received everything, for any records
//! split over nodes (an attempt redelivered to both, a workflow's attempts
//! on either), with rerouted, pooled, tiered, billed and unpriced attempts,
//! and any window and workflow: `report --lake`'s one pass of SQL (the
//! sections every lake engine derives) and `--every-section` (every
//! section, by the node's own derivation) both equal the node's report.

use std::path::Path;
use std::sync::Arc;

use attempt_core::ingest::jsonl;
use attempt_core::pricing::PriceTable;
use attempt_core::request::ReportFilter;
use attempt_ledger::lake::export::{export, open_bound};
use attempt_ledger::lake::read::{BadFiles, Sections, Source, lake_report};
use attempt_ledger::lake::storage::Location;
use attempt_ledger::report::Report;
use attempt_ledger::store::Store;
use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::lake::sections;
use crate::properties::{cases, workflows};
use crate::report_of;

/// What an attempt adds to the drawn workflows' fields: who served it,
/// its pool, tier, account and reasoning, or a model no price lists.
fn shaped(line: &str, shape: u8, account: bool) -> String {
    let mut record: Value = serde_json::from_str(line).unwrap();
    match shape {
        1 => {
            record["served_provider"] = json!("azure");
            record["served_model"] = record["model"].clone();
        }
        2 => record["route_group"] = json!("chat-pool"),
        3 => record["service_tier"] = json!("flex"),
        4 => record["batch"] = json!(true),
        5 => record["model"] = json!("in-house-7b"),
        6 => record["reasoning_output_tokens"] = json!(record["output_tokens"].as_i64().unwrap_or(0) / 2),
        _ => {}
    }
    if account {
        record["billing_account"] = json!("proj_a");
    }
    record.to_string()
}

fn store_of(lines: &[&String]) -> Store {
    let store = Store::open_in_memory().unwrap();
    if !lines.is_empty() {
        let text = lines.iter().map(|l| l.as_str()).collect::<Vec<_>>().join("\n");
        let decoded = jsonl::decode_lines(&text, 1);
        assert!(decoded.rejections.is_empty(), "{:?}", decoded.rejections);
        store.write_batch(&decoded.attempts).unwrap();
    }
    store
}

fn at(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap()
}

/// The report's sections as JSON, for `sections`.
fn json_of(report: &Report) -> Value {
    serde_json::to_value(report).unwrap()
}

/// The workflows' first attempts start here, 37 s apart (`workflows`).
const FIRST_MS: i64 = 1_795_831_200_000;

fn filter_of(choice: u8) -> ReportFilter {
    let window = |f: ReportFilter| ReportFilter {
        since: Some(at(FIRST_MS + 37_000)),
        until: Some(at(FIRST_MS + 3 * 37_000)),
        ..f
    };
    match choice {
        0 => ReportFilter::default(),
        1 => ReportFilter { workflow: Some("even".into()), ..ReportFilter::default() },
        2 => window(ReportFilter::default()),
        _ => window(ReportFilter { workflow: Some("odd".into()), ..ReportFilter::default() }),
    }
}

fn read(lake: &Path, filter: &ReportFilter, prices: &Arc<PriceTable>, sections: Sections) -> Report {
    // A year around the window: the drawn workflows span days at most, so
    // every attempt of a reported workflow is read.
    let location = Location::Folder(lake.to_path_buf());
    lake_report(
        Source { location: &location, table: None },
        filter,
        Duration::days(366),
        BadFiles::Refuse,
        prices.clone(),
        Default::default(),
        sections,
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(24), ..ProptestConfig::default() })]

    #[test]
    fn a_lake_of_any_split_answers_as_one_node(
        lines in workflows(),
        shapes in prop::collection::vec((0u8..8, any::<bool>()), 1..16),
        // Of each line: node a, node b, or both (a redelivery).
        nodes in prop::collection::vec(0u8..3, 1..16),
        choice in 0u8..4,
    ) {
        let lines: Vec<String> = lines
            .iter()
            .enumerate()
            .map(|(i, line)| {
                let (shape, account) = shapes[i % shapes.len()];
                shaped(line, shape, account)
            })
            .collect();
        let to = |node: u8| -> Vec<&String> {
            lines.iter().enumerate().filter(|(i, _)| [node, 2].contains(&nodes[i % nodes.len()])).map(|(_, l)| l).collect()
        };
        let (to_a, to_b) = (to(0), to(1));
        let prices = Arc::new(PriceTable::load(None).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let lake = dir.path().join("lake");
        for (node, sent) in [("a", &to_a), ("b", &to_b)] {
            let store = store_of(sent);
            let (opened, binding) = open_bound(&store, &Location::Folder(lake.clone()), None, node, false, None).unwrap();
            export(&store, &opened, &binding, &prices).unwrap();
        }
        let whole = store_of(&lines.iter().collect::<Vec<_>>());
        let filter = filter_of(choice);
        let want = report_of(&whole, &filter);

        let one_pass = read(&lake, &filter, &prices, Sections::Lake);
        prop_assert_eq!(sections(&json_of(&one_pass)), sections(&json_of(&want)), "report --lake, {:?}", filter);
        let every = read(&lake, &filter, &prices, Sections::Every { with_audit: false });
        let (mut every_json, mut want_json) = (json_of(&every), json_of(&want));
        every_json.as_object_mut().unwrap().remove("lake");
        want_json.as_object_mut().unwrap().remove("lake");
        prop_assert_eq!(every_json, want_json, "report --lake --every-section, {:?}", filter);

        let (fast, slow) = (one_pass.lake.unwrap(), every.lake.unwrap());
        prop_assert_eq!(fast.copies_read, (to_a.len() + to_b.len()) as u64, "every copy was read");
        prop_assert_eq!((fast.copies_read, fast.attempts), (slow.copies_read, slow.attempts));
        prop_assert_eq!(fast.attempts, lines.len() as u64, "each attempt once");
        prop_assert_eq!(fast.attempts_outside_horizon, 0);
    }
}
