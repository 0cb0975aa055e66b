//! The recovery audit: where retries and fallbacks broke the rules a
//! recovery policy sets (`queries/audit.sql`), each finding with the
//! workflows and attempts that made it, what they cost, and examples.
//! `attempt-ledger audit` and `GET /api/v1/audit`.

use std::collections::BTreeMap;

use comfy_table::{Cell, CellAlignment, ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;
use strum::VariantArray;

use super::{usd, whole_number};
use crate::store::queries::AuditRow;
use attempt_core::finding::FindingKind;
use attempt_core::policy::{LoadedPolicy, PolicySet};

/// Entries of a finding's `by_class`: route keys and workflow names come
/// from clients, so the map is bounded like any label set.
pub const MAX_CLASSES: usize = 50;

/// The `MAX_CLASSES` - 1 classes with the most attempts (ties by name), and
/// the rest summed under `(other)` when there are more than `MAX_CLASSES`.
fn bounded_classes(classes: &[(String, i64)]) -> BTreeMap<String, i64> {
    if classes.len() <= MAX_CLASSES {
        return classes.iter().cloned().collect();
    }
    let mut ranked: Vec<&(String, i64)> = classes.iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let (kept, rest) = ranked.split_at(MAX_CLASSES - 1);
    let mut map: BTreeMap<String, i64> = kept.iter().map(|(c, n)| (c.clone(), *n)).collect();
    map.insert("(other)".to_string(), rest.iter().map(|(_, n)| n).sum());
    map
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Audit {
    /// The policy file read; `null`: the built-in defaults.
    pub policy: Option<String>,
    /// Workflows with rules of their own (the rest have the default's).
    pub policy_workflows: Vec<String>,
    pub findings: Vec<Finding>,
}

impl Audit {
    /// The audit of `rows` (`queries/audit.sql`'s, read with `policy`).
    pub fn of(policy: &LoadedPolicy, rows: &[AuditRow]) -> Audit {
        Audit::from_rows(rows, policy.file.as_deref(), &policy.set)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub finding: FindingKind,
    pub why: &'static str,
    /// `null` for `over_retry_budget`, which counts minutes.
    pub workflows: Option<i64>,
    /// `over_retry_budget`: the (workflow name, minute) pairs over the
    /// budget; `null` for the other findings.
    pub minutes: Option<i64>,
    /// `stacked_retries`: every attempt its workflows made, and that per
    /// workflow (what the stacked layers multiplied one call into);
    /// `null` for the other findings.
    pub workflow_attempts: Option<i64>,
    pub amplification: Option<f64>,
    pub attempts: i64,
    #[serde(serialize_with = "whole_number")]
    pub input_tokens: i128,
    #[serde(serialize_with = "whole_number")]
    pub output_tokens: i128,
    /// Known cost of those attempts; `unknown_cost_attempts` apart.
    pub cost_usd: f64,
    pub unknown_cost_attempts: i64,
    /// Attempts by the error class or commit state behind them (route key,
    /// layers or workflow name for some findings): at most `MAX_CLASSES`
    /// entries, the rest summed under `(other)`.
    pub by_class: BTreeMap<String, i64>,
    /// Workflow ids, the latest first attempt first; for
    /// `over_retry_budget`, minutes (RFC 3339, UTC), latest first.
    pub examples: Vec<String>,
}

impl Finding {
    /// What an alert on this finding counts: workflows, or minutes for the
    /// retry budget.
    pub fn count(&self) -> i64 {
        self.workflows.or(self.minutes).unwrap_or(0)
    }

    /// The unit of `count`.
    pub fn unit(&self) -> &'static str {
        if self.minutes.is_some() { "minutes" } else { "workflows" }
    }
}

impl Audit {
    pub fn from_rows(rows: &[AuditRow], policy_file: Option<&str>, policy: &PolicySet) -> Audit {
        let findings = FindingKind::VARIANTS
            .iter()
            .map(|&finding| {
                let row = rows.iter().find(|r| r.finding == finding);
                let retry_budget = finding.counts_minutes();
                let workflows = (!retry_budget).then(|| row.and_then(|r| r.workflows).unwrap_or(0));
                let workflow_attempts = (finding == FindingKind::StackedRetries)
                    .then(|| row.and_then(|r| r.workflow_attempts).unwrap_or(0));
                Finding {
                    finding,
                    why: finding.why(),
                    workflows,
                    minutes: retry_budget.then(|| row.and_then(|r| r.minutes).unwrap_or(0)),
                    workflow_attempts,
                    amplification: workflow_attempts
                        .zip(workflows)
                        .filter(|(_, w)| *w > 0)
                        .map(|(a, w)| (a as f64 / w as f64 * 100.0).round() / 100.0),
                    attempts: row.map_or(0, |r| r.attempts),
                    input_tokens: row.map_or(0, |r| r.input_tokens),
                    output_tokens: row.map_or(0, |r| r.output_tokens),
                    cost_usd: usd(row.map_or(0, |r| r.cost_pusd)),
                    unknown_cost_attempts: row.map_or(0, |r| r.unknown_cost_attempts),
                    by_class: row.map(|r| bounded_classes(&r.by_class)).unwrap_or_default(),
                    examples: row.map(|r| r.examples.clone()).unwrap_or_default(),
                }
            })
            .collect();
        Audit {
            policy: policy_file.map(str::to_string),
            policy_workflows: policy.workflows.iter().map(|(name, _)| name.clone()).collect(),
            findings,
        }
    }

    pub fn render(&self, format: super::Format) -> String {
        match format {
            super::Format::Json => serde_json::to_string_pretty(self).unwrap_or_default() + "\n",
            super::Format::Csv => self.csv(),
            super::Format::Table => self.table(),
        }
    }

    fn csv(&self) -> String {
        let mut writer = ::csv::Writer::from_writer(Vec::new());
        let _ = writer.write_record([
            "finding",
            "workflows",
            "minutes",
            "amplification",
            "attempts",
            "input_tokens",
            "output_tokens",
            "cost_usd",
            "unknown_cost_attempts",
            "by_class",
            "examples",
        ]);
        for f in &self.findings {
            let classes: Vec<String> = f.by_class.iter().map(|(c, n)| format!("{c}={n}")).collect();
            let _ = writer.write_record([
                f.finding.to_string(),
                f.workflows.map(|n| n.to_string()).unwrap_or_default(),
                f.minutes.map(|n| n.to_string()).unwrap_or_default(),
                f.amplification.map(|x| x.to_string()).unwrap_or_default(),
                f.attempts.to_string(),
                f.input_tokens.to_string(),
                f.output_tokens.to_string(),
                f.cost_usd.to_string(),
                f.unknown_cost_attempts.to_string(),
                classes.join(" "),
                f.examples.join(" "),
            ]);
        }
        String::from_utf8(writer.into_inner().unwrap_or_default()).unwrap_or_default()
    }

    fn table(&self) -> String {
        let mut table = Table::new();
        table.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
        table.set_header([
            "finding",
            "workflows",
            "attempts",
            "tokens in/out",
            "cost",
            "by class",
            "examples",
        ]);
        for f in &self.findings {
            let classes: Vec<String> = f.by_class.iter().map(|(c, n)| format!("{c} {n}")).collect();
            let cost = if f.unknown_cost_attempts > 0 {
                format!("${:.4} (+{} unknown)", f.cost_usd, f.unknown_cost_attempts)
            } else {
                format!("${:.4}", f.cost_usd)
            };
            let finding = match f.amplification {
                Some(x) => format!("{} ({x:.1}x)", f.finding),
                None => f.finding.to_string(),
            };
            let count = match f.minutes {
                Some(minutes) => format!("{minutes} min"),
                None => f.count().to_string(),
            };
            table.add_row(vec![
                Cell::new(finding),
                Cell::new(count).set_alignment(CellAlignment::Right),
                Cell::new(f.attempts).set_alignment(CellAlignment::Right),
                Cell::new(format!("{} / {}", f.input_tokens, f.output_tokens))
                    .set_alignment(CellAlignment::Right),
                Cell::new(cost).set_alignment(CellAlignment::Right),
                Cell::new(classes.join(", ")),
                Cell::new(f.examples.iter().take(3).cloned().collect::<Vec<_>>().join(", ")),
            ]);
        }
        let why: Vec<String> = self.findings.iter().map(|f| format!("  {}: {}", f.finding, f.why)).collect();
        let policy = match &self.policy {
            Some(file) => format!("policy {file}"),
            None => "the built-in policy: attempt-ledger audit --policy FILE for your own".to_string(),
        };
        format!("Recovery audit ({policy})\n{table}\n{}\n", why.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn by_class_keeps_the_largest_and_sums_the_rest() {
        let many: Vec<(String, i64)> = (0..120).map(|i| (format!("route-{i:03}"), i)).collect();
        let bounded = super::bounded_classes(&many);
        assert_eq!(bounded.len(), super::MAX_CLASSES);
        assert_eq!(bounded.values().sum::<i64>(), many.iter().map(|(_, n)| n).sum::<i64>(), "nothing lost");
        assert_eq!(bounded.get("route-119"), Some(&119));
        assert_eq!(bounded.get("(other)"), Some(&(0..=70).sum::<i64>()));
        let few = vec![("quota".to_string(), 2)];
        assert_eq!(super::bounded_classes(&few).len(), 1);
    }
}
