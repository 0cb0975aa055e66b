//! `tune`'s answer: the value-of-each-retry curve and, for a candidate
//! policy, the replay's before and after (docs/record-format.md, "Tuning
//! recovery"). Shaped from the curve's rows, the replayed workflows and the
//! report they are compared with; no rule lives here.

use comfy_table::Cell;
use serde::Serialize;

use super::quantile::{self, Quantiles};
use super::{Format, Report, WorkflowCounts, usd};
use crate::store::ReportRows;
use crate::store::tune::CurveRow;
use attempt_core::model::Outcome;
use attempt_core::replay::shape::Tally;

/// Workflow ids listed as examples of success lost.
pub const SUCCESS_LOST_EXAMPLES: usize = 5;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tune {
    /// Workflows in scope (the curve's shares are of these).
    pub workflows: i64,
    pub curve: Vec<CurveLine>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplaySummary>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CurveLine {
    /// `retry` (an attempt position) or `first_fallback`.
    pub step: String,
    pub position: Option<i64>,
    /// The line sums positions from `position` on (the last one).
    pub and_later: bool,
    pub layer: String,
    pub after_class: String,
    pub primary_route: String,
    pub undelivered_before: i64,
    pub delivered: i64,
    /// Percentage points of all workflows in scope.
    pub marginal_success: Option<f64>,
    pub attempts: i64,
    pub tokens: i128,
    pub cost_usd: f64,
    pub unknown_cost_attempts: i64,
    pub elapsed_ms: f64,
    /// Known cost per workflow delivered; `None` when none was.
    pub cost_per_rescued_usd: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BeforeAfter<T> {
    pub before: T,
    pub after: T,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplaySummary {
    /// What was replayed: the policy file and the `--set` assignments.
    pub policy: String,
    pub before: WorkflowCounts,
    pub after: WorkflowCounts,
    /// Workflows delivered as recorded and not in the replay.
    pub success_lost: i64,
    pub success_lost_examples: Vec<String>,
    /// Workflows whose replay kept an attempt after a layer gave up (its
    /// result recorded, its time moved earlier): the replay's one assumption.
    pub moved_attempt_workflows: i64,
    /// Workflows the replay changed at all (an attempt removed).
    pub changed_workflows: i64,
    pub attempts: BeforeAfter<i64>,
    pub tokens: BeforeAfter<i128>,
    pub cost_usd: BeforeAfter<f64>,
    pub wasted_cost_usd: BeforeAfter<f64>,
    pub unknown_cost_attempts: BeforeAfter<i64>,
    pub time_to_outcome_ms: BeforeAfter<Quantiles>,
}

/// What a replay sums to, before it is set beside the report
/// (`read::replay` fills it).
#[derive(Debug, Default)]
pub struct ReplayFigures {
    pub tally: Tally,
    /// Time to outcome of every workflow in scope the replay leaves as
    /// recorded, each with how many workflows took it, in no particular
    /// order (a value may come more than once).
    pub unchanged_ms: Vec<(f64, u64)>,
    /// Of the others, as recorded and as replayed.
    pub changed_before_ms: Vec<f64>,
    pub changed_after_ms: Vec<f64>,
    /// The lowest ids of the workflows whose success the replay loses.
    pub lost_examples: Vec<String>,
}

/// A replay to set beside the report: what it replayed and its figures.
pub struct ReplayInput {
    pub policy: String,
    pub figures: ReplayFigures,
}

impl Tune {
    pub fn shape(rows: &ReportRows, curve: &[CurveRow], replay: Option<ReplayInput>) -> Tune {
        let report = Report::from_unfolded_rows(rows, attempt_core::request::DEFAULT_RETRY_BUDGET);
        let workflows = report.workflows.total;
        let curve = curve
            .iter()
            .map(|r| CurveLine {
                step: r.step.clone(),
                position: r.position,
                and_later: r.and_later,
                layer: r.layer.clone(),
                after_class: r.after_class.clone(),
                primary_route: r.primary_route.clone(),
                undelivered_before: r.undelivered_before,
                delivered: r.delivered,
                marginal_success: (workflows > 0).then(|| 100.0 * r.delivered as f64 / workflows as f64),
                attempts: r.attempts,
                tokens: r.tokens,
                cost_usd: usd(r.cost_pusd),
                unknown_cost_attempts: r.unknown_cost_attempts,
                elapsed_ms: r.elapsed_ms,
                cost_per_rescued_usd: (r.delivered > 0).then(|| usd(r.cost_pusd) / r.delivered as f64),
            })
            .collect();
        let replay = replay.map(|input| summarise(rows, &report, input));
        Tune { workflows, curve, replay }
    }

    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Json => serde_json::to_string_pretty(self).expect("tune always serialises") + "\n",
            Format::Csv => self.csv(),
            Format::Table => self.table(),
        }
    }

    /// The curve's lines, then the replay's figures as metric,before,after.
    fn csv(&self) -> String {
        let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
        let mut writer = ::csv::Writer::from_writer(Vec::new());
        let _ = writer.write_record([
            "step",
            "position",
            "and_later",
            "layer",
            "after_class",
            "primary_route",
            "undelivered_before",
            "delivered",
            "marginal_success",
            "attempts",
            "tokens",
            "cost_usd",
            "unknown_cost_attempts",
            "elapsed_ms",
            "cost_per_rescued_usd",
        ]);
        for l in &self.curve {
            let _ = writer.write_record([
                l.step.clone(),
                l.position.map(|p| p.to_string()).unwrap_or_default(),
                l.and_later.to_string(),
                l.layer.clone(),
                l.after_class.clone(),
                l.primary_route.clone(),
                l.undelivered_before.to_string(),
                l.delivered.to_string(),
                opt(l.marginal_success),
                l.attempts.to_string(),
                l.tokens.to_string(),
                l.cost_usd.to_string(),
                l.unknown_cost_attempts.to_string(),
                l.elapsed_ms.to_string(),
                opt(l.cost_per_rescued_usd),
            ]);
        }
        let mut out = String::from_utf8(writer.into_inner().unwrap_or_default()).unwrap_or_default();
        if let Some(r) = &self.replay {
            out += "\nmetric,before,after\n";
            for (metric, before, after) in r.metrics(|usd| usd.to_string()) {
                out += &format!("{metric},{before},{after}\n");
            }
        }
        out
    }

    fn table(&self) -> String {
        use super::render::{dollars, new_table, right};
        let mut out = format!(
            "The value of each retry ({} workflows; position k = the k-th attempt, overall)\n",
            self.workflows
        );
        let mut t = new_table(&[
            "attempt",
            "undelivered before",
            "delivered",
            "success bought",
            "attempts",
            "cost",
            "elapsed",
            "cost per rescued",
        ]);
        let overall = self
            .curve
            .iter()
            .filter(|l| l.layer == "all" && l.after_class == "all" && l.primary_route == "all");
        for l in overall {
            let label = match (l.position, l.and_later) {
                (Some(k), false) => format!("#{k}"),
                (Some(k), true) => format!("#{k} and later"),
                (None, _) => "first fallback".to_string(),
            };
            t.add_row(vec![
                Cell::new(label),
                right(l.undelivered_before),
                right(l.delivered),
                right(l.marginal_success.map_or("-".into(), |pp| format!("{pp:.2} pp"))),
                right(l.attempts),
                right(dollars(l.cost_usd)),
                right(format!("{:.1} s", l.elapsed_ms / 1000.0)),
                right(l.cost_per_rescued_usd.map_or("-".into(), dollars)),
            ]);
        }
        out += &t.to_string();
        out += "\nBy layer, by the class before, by primary route: --format json or csv.\n";
        if let Some(r) = &self.replay {
            out += &format!("\nReplay of {}\n", r.policy);
            let mut t = new_table(&["", "recorded", "replayed"]);
            for (metric, before, after) in r.metrics(dollars) {
                t.add_row(vec![Cell::new(metric), right(before), right(after)]);
            }
            out += &t.to_string();
            out += &format!(
                "\nsuccess lost: {} workflows{}\n",
                r.success_lost,
                if r.success_lost_examples.is_empty() {
                    String::new()
                } else {
                    format!(" (e.g. {})", r.success_lost_examples.join(", "))
                }
            );
            out += &format!(
                "{} of {} changed workflows rest on an outer layer's recorded attempt moved earlier \
                 (an inner layer gave up sooner); the others are exact.\n",
                r.moved_attempt_workflows, r.changed_workflows
            );
        }
        out
    }
}

impl ReplaySummary {
    /// The figures as (metric, recorded, replayed) text, dollars written by `money`.
    fn metrics(&self, money: impl Fn(f64) -> String) -> Vec<(&'static str, String, String)> {
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
        let counts = |w: &WorkflowCounts| {
            [
                w.primary_success,
                w.retry_recovery,
                w.fallback_recovery,
                w.degraded,
                w.queued,
                w.in_flight,
                w.fail_closed,
            ]
        };
        let names = <Outcome as strum::VariantNames>::VARIANTS;
        let mut out: Vec<_> = names
            .iter()
            .zip(counts(&self.before).into_iter().zip(counts(&self.after)))
            .map(|(n, (b, a))| (*n, b.to_string(), a.to_string()))
            .collect();
        out.extend([
            ("attempts", self.attempts.before.to_string(), self.attempts.after.to_string()),
            ("tokens", self.tokens.before.to_string(), self.tokens.after.to_string()),
            ("cost_usd", money(self.cost_usd.before), money(self.cost_usd.after)),
            ("wasted_cost_usd", money(self.wasted_cost_usd.before), money(self.wasted_cost_usd.after)),
            (
                "time_to_outcome_ms_p50",
                ms(self.time_to_outcome_ms.before.p50),
                ms(self.time_to_outcome_ms.after.p50),
            ),
            (
                "time_to_outcome_ms_p99",
                ms(self.time_to_outcome_ms.before.p99),
                ms(self.time_to_outcome_ms.after.p99),
            ),
        ]);
        out
    }
}

fn summarise(rows: &ReportRows, report: &Report, input: ReplayInput) -> ReplaySummary {
    let ReplayFigures { tally, unchanged_ms, changed_before_ms, changed_after_ms, lost_examples } =
        input.figures;
    let [before_ms, after_ms] = quantile::beside(&unchanged_ms, [&changed_before_ms, &changed_after_ms]);
    let mut after = report.workflows.clone();
    let outcomes =
        <Outcome as strum::VariantNames>::VARIANTS.iter().filter_map(|n| n.parse::<Outcome>().ok());
    for outcome in outcomes {
        *count(&mut after, outcome) += tally.outcomes[outcome as usize];
    }
    let (w, d) = (&rows.waste, &tally.figures);
    let total_tokens = w.input_tokens + w.output_tokens;
    ReplaySummary {
        policy: input.policy,
        before: report.workflows.clone(),
        after,
        success_lost: tally.success_lost as i64,
        success_lost_examples: lost_examples,
        moved_attempt_workflows: tally.moved as i64,
        changed_workflows: tally.changed as i64,
        attempts: BeforeAfter { before: w.attempts, after: w.attempts + d.attempts },
        tokens: BeforeAfter { before: total_tokens, after: total_tokens + d.tokens },
        cost_usd: BeforeAfter { before: usd(w.cost_pusd), after: usd(w.cost_pusd + d.cost_pusd) },
        wasted_cost_usd: BeforeAfter {
            before: usd(w.wasted_cost_pusd),
            after: usd(w.wasted_cost_pusd + d.wasted_cost_pusd),
        },
        unknown_cost_attempts: BeforeAfter {
            before: w.unknown_cost_attempts,
            after: w.unknown_cost_attempts + d.unknown_cost_attempts,
        },
        time_to_outcome_ms: BeforeAfter { before: before_ms, after: after_ms },
    }
}

fn count(counts: &mut WorkflowCounts, outcome: Outcome) -> &mut i64 {
    match outcome {
        Outcome::PrimarySuccess => &mut counts.primary_success,
        Outcome::RetryRecovery => &mut counts.retry_recovery,
        Outcome::FallbackRecovery => &mut counts.fallback_recovery,
        Outcome::Degraded => &mut counts.degraded,
        Outcome::Queued => &mut counts.queued,
        Outcome::InFlight => &mut counts.in_flight,
        Outcome::FailClosed => &mut counts.fail_closed,
    }
}

/// `tune --suggest`: the suggested limits of each workflow name and the
/// policy file that holds them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Suggestion {
    pub tolerance_pp: f64,
    pub workflows: Vec<SuggestedLine>,
    /// The policy file, in the audit's format.
    pub policy: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SuggestedLine {
    /// `None`: records without a `workflow` name (the file's `[default]`).
    pub workflow: Option<String>,
    pub workflows: u64,
    /// By layer: retries of the same route per call of the layers outside it.
    pub max_retries: std::collections::BTreeMap<String, u64>,
    /// Classes after which it may fall back; `None`: any.
    pub fallback_on: Option<Vec<String>>,
    pub success_lost: u64,
    pub success_lost_pp: f64,
    pub attempts_saved: i64,
    pub wasted_cost_saved_usd: f64,
}

impl Suggestion {
    /// Each name's suggestion with what its limits change (replayed minus recorded).
    pub fn shape(
        suggested: &[(attempt_core::replay::suggest::Suggested, attempt_core::replay::Figures)],
        tolerance_pp: f64,
    ) -> Suggestion {
        use attempt_core::model::Layer;
        let layers = [Layer::Sdk, Layer::Gateway, Layer::App, Layer::Queue];
        let workflows: Vec<SuggestedLine> = suggested
            .iter()
            .map(|(s, change)| SuggestedLine {
                workflow: s.name.clone(),
                workflows: s.workflows,
                max_retries: layers
                    .iter()
                    .filter_map(|l| {
                        s.limits.max_retries[*l as usize]
                            .map(|n| (attempt_core::model::name(*l).to_string(), n))
                    })
                    .collect(),
                fallback_on: s.limits.fallback_on.as_ref().map(|classes| {
                    classes.iter().map(|c| attempt_core::model::name(*c).to_string()).collect()
                }),
                success_lost: s.success_lost,
                success_lost_pp: 100.0 * s.success_lost as f64 / s.workflows.max(1) as f64,
                attempts_saved: -change.attempts,
                wasted_cost_saved_usd: usd(-change.wasted_cost_pusd),
            })
            .collect();
        let policy = policy_file(&workflows, tolerance_pp);
        Suggestion { tolerance_pp, workflows, policy }
    }

    pub fn render(&self, format: Format) -> String {
        use super::render::{dollars, new_table, right};
        match format {
            Format::Json => {
                serde_json::to_string_pretty(self).expect("a suggestion always serialises") + "\n"
            }
            Format::Csv => {
                let mut writer = ::csv::Writer::from_writer(Vec::new());
                let _ = writer.write_record([
                    "workflow",
                    "workflows",
                    "max_retries",
                    "fallback_on",
                    "success_lost",
                    "success_lost_pp",
                    "attempts_saved",
                    "wasted_cost_saved_usd",
                ]);
                for l in &self.workflows {
                    let _ = writer.write_record([
                        l.workflow.clone().unwrap_or_default(),
                        l.workflows.to_string(),
                        retries_text(&l.max_retries),
                        l.fallback_on.as_ref().map(|c| c.join(" ")).unwrap_or_default(),
                        l.success_lost.to_string(),
                        l.success_lost_pp.to_string(),
                        l.attempts_saved.to_string(),
                        l.wasted_cost_saved_usd.to_string(),
                    ]);
                }
                String::from_utf8(writer.into_inner().unwrap_or_default()).unwrap_or_default()
            }
            Format::Table => {
                let mut t = new_table(&[
                    "workflow",
                    "workflows",
                    "max_retries",
                    "fallback_on",
                    "success lost",
                    "attempts saved",
                    "waste saved",
                ]);
                for l in &self.workflows {
                    t.add_row(vec![
                        Cell::new(l.workflow.as_deref().unwrap_or("(no name)")),
                        right(l.workflows),
                        Cell::new(retries_text(&l.max_retries)),
                        Cell::new(l.fallback_on.as_ref().map_or("any".to_string(), |c| c.join(", "))),
                        right(format!("{} ({:.3} pp)", l.success_lost, l.success_lost_pp)),
                        right(l.attempts_saved),
                        right(dollars(l.wasted_cost_saved_usd)),
                    ]);
                }
                format!(
                    "The smallest limits whose replay keeps each workflow's success within {} pp\n{t}\n",
                    self.tolerance_pp
                )
            }
        }
    }
}

fn retries_text(retries: &std::collections::BTreeMap<String, u64>) -> String {
    let parts: Vec<String> = retries.iter().map(|(layer, n)| format!("{layer}={n}")).collect();
    if parts.is_empty() { "as recorded".into() } else { parts.join(" ") }
}

/// The suggestion as a policy file `audit --policy` and `tune --policy` read.
fn policy_file(lines: &[SuggestedLine], tolerance_pp: f64) -> String {
    let quoted = |text: &str| toml::Value::String(text.to_string()).to_string();
    let mut out = format!(
        "# Written by `attempt-ledger tune --suggest`: for each workflow name, the\n\
         # smallest limits whose replay keeps its success within {tolerance_pp} percentage\n\
         # point of the recorded traffic's. `attempt-ledger audit --policy` checks them.\n"
    );
    let mut ordered: Vec<&SuggestedLine> = lines.iter().filter(|l| l.workflow.is_none()).collect();
    ordered.extend(lines.iter().filter(|l| l.workflow.is_some()));
    for l in ordered {
        out += &match &l.workflow {
            None => "\n[default]\n".to_string(),
            Some(name) => format!("\n[[workflow]]\nname = {}\n", quoted(name)),
        };
        if !l.max_retries.is_empty() {
            let parts: Vec<String> =
                l.max_retries.iter().map(|(layer, n)| format!("{layer} = {n}")).collect();
            out += &format!("max_retries = {{ {} }}\n", parts.join(", "));
        }
        if let Some(classes) = &l.fallback_on {
            let parts: Vec<String> = classes.iter().map(|c| quoted(c)).collect();
            out += &format!("fallback_on = [{}]\n", parts.join(", "));
        }
    }
    out
}
