//! An alert as it stands at a transition: what the history stores, what
//! receivers are sent and what the dashboard shows. Below the store, which
//! keeps the history, and the evaluator, which makes the events.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr, strum::EnumString)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum AlertState {
    /// Breaching, but not yet for the rule's `for`.
    Pending,
    Firing,
    Resolved,
}

/// An alert as it stands at a transition; what history stores and what
/// receivers are sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlertEvent {
    /// When this state was entered.
    pub at: DateTime<Utc>,
    /// Rule name plus instance labels: one alert per key.
    pub key: String,
    pub rule: String,
    pub kind: String,
    pub severity: String,
    pub labels: BTreeMap<String, String>,
    pub state: AlertState,
    /// First evaluation of this episode that breached.
    pub active_since: DateTime<Utc>,
    /// The rule's value at the last evaluation (`null`: no data).
    pub value: Option<f64>,
    pub threshold: f64,
    pub summary: String,
    /// The report figures behind the value (routes and reasons for fallbacks).
    pub details: serde_json::Value,
}

impl AlertEvent {
    pub fn key_of(rule: &str, labels: &BTreeMap<String, String>) -> String {
        if labels.is_empty() {
            return rule.to_string();
        }
        let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
        format!("{rule}{{{}}}", inner.join(","))
    }
}
