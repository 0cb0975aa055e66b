//! One snapshot per `queries/*.sql` against the fixture database, printed
//! with arrow's pretty printer, plus the JSON report over the same data. A
//! changed snapshot is a diff to review, never to accept blindly.

use attempt_ledger::pricing::PriceTable;
use attempt_ledger::report::{Format, render};
use attempt_ledger::store::{Query, ReportFilter};

use crate::{FIXTURE, report_of, store_with};

fn fixture_lines() -> Vec<String> {
    FIXTURE.lines().map(String::from).collect()
}

#[test]
fn every_query_file_against_the_fixture() {
    let store = store_with(&fixture_lines());
    let prices = PriceTable::load(None).unwrap();
    for query in Query::ALL {
        let table = store.query_table(query, &ReportFilter::default(), &prices).unwrap();
        insta::assert_snapshot!(query.file_name(), table);
    }
}

#[test]
fn every_query_file_has_a_snapshot_and_a_header() {
    let files: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/queries"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".sql"))
        .collect();
    // metrics.sql feeds /metrics, checked against the report in alerts.rs;
    // the derivation files build what every report reads (properties.rs
    // checks them against a rebuild).
    let derivation = ["facts.sql", "rollups.sql", "window.sql", "scope.sql", "labels.sql", "admit.sql"];
    // groups.sql runs only for --group-by: its snapshot is json_report_grouped_by_a_dimension.
    let known: Vec<&str> = Query::ALL
        .iter()
        .map(|q| q.file_name())
        .chain(["metrics.sql", "groups.sql"])
        .chain(derivation)
        .collect();
    for file in &files {
        assert!(known.contains(&file.as_str()), "{file} is not run by the report");
        let text = std::fs::read_to_string(format!("{}/queries/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        assert!(text.starts_with(&format!("-- {file}:")), "{file} lacks its header comment");
        assert!(text.contains("-- Parameters:") && text.contains("-- Columns"), "{file} header");
    }
    assert_eq!(files.len(), known.len());
}

/// The fixture grouped by the provider that served (a record field as a
/// dimension): the `groups` section of the JSON report.
#[test]
fn json_report_grouped_by_a_dimension() {
    let store = store_with(&fixture_lines());
    store.set_dimensions(&["served=served_provider".parse().unwrap()]).unwrap();
    let report =
        report_of(&store, &ReportFilter { group_by: Some("served".into()), ..ReportFilter::default() });
    let groups = serde_json::to_string_pretty(&report.groups).unwrap();
    insta::assert_snapshot!("groups.json", groups);
}

#[test]
fn json_report_of_the_fixture() {
    let report = report_of(&store_with(&fixture_lines()), &ReportFilter::default());
    insta::assert_snapshot!("report.json", render(&report, Format::Json));
}
