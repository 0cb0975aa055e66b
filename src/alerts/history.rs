//! The alert history as `attempt-ledger alerts` prints it, and
//! `GET /api/v1/alerts?format=` with it, so the two cannot differ.

use chrono::{DateTime, SecondsFormat, Utc};
use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

use attempt_core::alert_event::AlertEvent;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

/// `events`, newest first, in `format`.
pub fn render(events: &[AlertEvent], format: Format) -> String {
    match format {
        Format::Json => serde_json::to_string_pretty(events).unwrap_or_default() + "\n",
        Format::Table if events.is_empty() => "No alert has fired yet. Run `attempt-ledger serve --rules FILE` to \
             evaluate rules live,\nor `attempt-ledger alerts --check --rules FILE` to replay them over stored data.\n"
            .to_string(),
        Format::Table => format!("{}\n", events_table(events)),
    }
}

pub fn text_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn value_text(v: Option<f64>) -> String {
    v.map_or("no data".into(), |v| format!("{v:.4}"))
}

pub fn new_table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    table.set_header(header.iter().copied());
    table
}

pub fn events_table(events: &[AlertEvent]) -> Table {
    let mut t = new_table(&["at", "state", "alert", "severity", "value", "threshold", "summary"]);
    for e in events {
        t.add_row(vec![
            text_time(e.at),
            <&str>::from(e.state).to_string(),
            e.key.clone(),
            e.severity.clone(),
            value_text(e.value),
            e.threshold.to_string(),
            e.summary.clone(),
        ]);
    }
    t
}
