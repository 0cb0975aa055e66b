//! Replays by shape. A workflow's shape is what the limits that look only
//! at its attempts in order see of it: each attempt's layer, route,
//! fallback, failure class, deliverability, decision and commit marker, and
//! the recorded outcome. Every limit but three reads nothing else
//! (`max_elapsed_ms` reads times, `max_extra_cost_usd` costs, and the retry
//! budget other workflows), so under those limits the workflows of one
//! shape share one plan: a replay decides once per shape, and the store
//! sums what each plan keeps, instead of reading every retried attempt.

use super::{Figures, Plan, Workflow, is_success};
use crate::model::Outcome;
use crate::policy::{LimitSet, Limits};

/// A plan's kept positions as bits (position n at bit n-1): what the store
/// sums by. A longer shape's workflows are replayed one by one.
pub const MAX_SHAPE_LENGTH: usize = 64;

/// Workflows of one shape (and one name: limits may differ by name).
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// The shape as the replay reads a workflow: its steps carry the
    /// decision inputs; times, tokens and costs are the store's sums.
    pub workflow: Workflow,
    /// Workflows of this shape in scope.
    pub workflows: u64,
}

/// Whether a replay under `limits` can decide once per shape.
pub fn reads_only_shapes(limits: &LimitSet) -> bool {
    limits.sections().all(|l: &Limits| {
        l.max_elapsed_ms.is_none() && l.max_extra_cost_pusd.is_none() && l.retry_budget.is_none()
    })
}

/// `plan`'s kept positions as bits; `None` past `MAX_SHAPE_LENGTH`.
pub fn kept_bits(plan: &Plan) -> Option<u64> {
    (plan.kept.len() <= MAX_SHAPE_LENGTH)
        .then(|| plan.kept.iter().enumerate().filter(|(_, k)| **k).fold(0u64, |bits, (i, _)| bits | (1 << i)))
}

/// A replay's totals: workflows by outcome, and the figures it changes,
/// replayed minus recorded. The same whether added workflow by workflow or
/// shape by shape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    /// Replayed minus recorded workflows, by outcome (`Outcome as usize`).
    pub outcomes: [i64; 7],
    /// Workflows delivered as recorded and not in the replay.
    pub success_lost: u64,
    /// Workflows with an attempt kept after a layer gave up.
    pub moved: u64,
    /// Workflows an attempt was removed from (or their outcome changed).
    pub changed: u64,
    /// Replayed minus recorded.
    pub figures: Figures,
}

impl Tally {
    /// Adds `workflows` changed workflows, recorded as `recorded` and
    /// replayed as `replayed`.
    pub fn count(&mut self, recorded: Outcome, replayed: Outcome, moved: bool, workflows: u64) {
        let n = workflows as i64;
        self.changed += workflows;
        self.moved += if moved { workflows } else { 0 };
        self.outcomes[recorded as usize] -= n;
        self.outcomes[replayed as usize] += n;
        if is_success(recorded) && !is_success(replayed) {
            self.success_lost += workflows;
        }
    }

    /// Adds what a replay changed of some attempts' figures.
    pub fn figures(&mut self, recorded: Figures, replayed: Figures) {
        let f = &mut self.figures;
        f.attempts += replayed.attempts - recorded.attempts;
        f.tokens += replayed.tokens - recorded.tokens;
        f.cost_pusd += replayed.cost_pusd - recorded.cost_pusd;
        f.wasted_cost_pusd += replayed.wasted_cost_pusd - recorded.wasted_cost_pusd;
        f.unknown_cost_attempts += replayed.unknown_cost_attempts - recorded.unknown_cost_attempts;
    }

    /// Adds one workflow recorded as `recorded_outcome`, replayed by `plan`;
    /// `recorded` and `replayed` are its figures.
    pub fn add(&mut self, recorded_outcome: Outcome, plan: &Plan, recorded: Figures, replayed: Figures) {
        if plan.whole(recorded_outcome) {
            return;
        }
        self.count(recorded_outcome, plan.outcome, plan.moved, 1);
        self.figures(recorded, replayed);
    }
}
