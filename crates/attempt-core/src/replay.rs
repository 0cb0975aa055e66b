//! What-if replays of a stricter recovery policy over recorded workflows
//! (docs/record-format.md, "Tuning recovery"). A replay keeps each
//! workflow's recorded attempts up to where the candidate limits would have
//! stopped it, and nothing it did not record: a policy that stops earlier
//! cannot change what happened before it stops.
//!
//! Two kinds of refusal. A limit on the whole workflow (attempts, elapsed
//! time, extra cost, fail closed) ends it there. A limit on one layer's
//! decision (its retries, a route's attempts, a class not to retry, a
//! fallback not allowed, the queue, the retry budget) makes that layer give
//! up: the workflow goes on at the next recorded attempt of a layer outside
//! it, or of the same layer on another route (its fallback), if there is
//! one. That attempt is kept with its recorded result, moved earlier by the
//! time the skipped attempts took, and its workflow is counted as moved:
//! the one assumption a replay makes.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::model::{Decision, ErrorClass, Layer, Outcome};
use crate::policy::{CommitMarker, Limits};

/// Layers from the innermost out: an outer layer's attempt is a new call of
/// every layer inside it (an app retry makes a new SDK call, whose retries
/// start afresh).
pub fn nesting(layer: Layer) -> usize {
    match layer {
        Layer::Sdk => 0,
        Layer::Gateway => 1,
        Layer::App => 2,
        Layer::Queue => 3,
    }
}

/// One recorded attempt, in its workflow's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Start, epoch microseconds (the retry budget's minute and order).
    pub start_us: i64,
    /// Start after the workflow's first attempt's start.
    pub offset_ms: f64,
    /// 0 when not reported.
    pub duration_ms: f64,
    pub layer: Layer,
    /// An index into the replay's route names (`Replay::routes`).
    pub route: u32,
    /// On a fallback route (the record's `route`, else not the primary).
    pub on_fallback: bool,
    /// `Some` when the attempt failed (`unknown` when unclassified).
    pub failure: Option<ErrorClass>,
    pub deliverable: bool,
    pub decision: Option<Decision>,
    pub commit: Option<CommitMarker>,
    pub tokens: i128,
    /// Known cost, pico-USD.
    pub cost_pusd: i128,
    pub cost_unknown: bool,
}

/// One recorded workflow with more than one attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    pub id: String,
    pub name: Option<String>,
    pub outcome: Outcome,
    pub outcome_ms: f64,
    pub steps: Vec<Step>,
}

/// A workflow as the replay ends it.
#[derive(Debug, Clone, PartialEq)]
pub struct Replayed {
    pub outcome: Outcome,
    pub outcome_ms: f64,
    pub attempts: u64,
    pub tokens: i128,
    pub cost_pusd: i128,
    pub wasted_cost_pusd: i128,
    pub unknown_cost_attempts: u64,
    /// An attempt was kept after a layer gave up: its result is recorded,
    /// its time moved earlier.
    pub moved: bool,
}

impl Replayed {
    /// The workflow as recorded (a replay under no limit).
    pub fn recorded(workflow: &Workflow) -> Replayed {
        let delivered = workflow.steps.iter().position(|s| s.deliverable);
        Replayed {
            outcome: workflow.outcome,
            outcome_ms: workflow.outcome_ms,
            attempts: workflow.steps.len() as u64,
            tokens: workflow.steps.iter().map(|s| s.tokens).sum(),
            cost_pusd: workflow.steps.iter().map(|s| s.cost_pusd).sum(),
            wasted_cost_pusd: workflow
                .steps
                .iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != delivered)
                .map(|(_, s)| s.cost_pusd)
                .sum(),
            unknown_cost_attempts: workflow.steps.iter().filter(|s| s.cost_unknown).count() as u64,
            moved: false,
        }
    }
}

/// Whether a step's outcome is a delivery.
pub fn is_success(outcome: Outcome) -> bool {
    matches!(outcome, Outcome::PrimarySuccess | Outcome::RetryRecovery | Outcome::FallbackRecovery)
}

/// The replay of one policy over a set of workflows.
pub struct Replay<'a> {
    /// Route names, by `Step::route`.
    pub routes: &'a [String],
    /// The first attempts of every workflow in scope (those with one
    /// attempt too), by workflow name and epoch minute: the retry budget's
    /// denominator.
    pub first_attempts: &'a HashMap<(Option<String>, i64), u64>,
}

/// Where a workflow's replay stands.
#[derive(Default)]
struct State {
    next: usize,
    kept: u64,
    tokens: i128,
    cost_pusd: i128,
    /// Known cost of the kept attempts not delivered.
    extra_pusd: i128,
    unknown_cost_attempts: u64,
    /// Retries of the same route by each layer since the last attempt of a
    /// layer outside it.
    retries: [u64; 4],
    /// Attempts kept on each route.
    route_attempts: Vec<(u32, u64)>,
    markers: Vec<CommitMarker>,
    last_kept: Option<usize>,
    delivered: Option<usize>,
    /// (nesting, route) of the refused attempt while skipping.
    skipping: Option<(usize, u32)>,
    ended: bool,
    moved: bool,
    /// Recorded start minus replayed start of the attempts kept since the
    /// last skip.
    shift_ms: f64,
    latest_end_kept: f64,
    latest_end_recorded: f64,
    delivered_end: Option<f64>,
    last_kept_recorded: bool,
}

enum Verdict {
    Keep,
    /// This layer gives up; an outer one may go on.
    GiveUp,
    /// The workflow ends.
    End,
}

impl Replay<'_> {
    /// Replays every workflow under `limits_of(name)`, in order of their
    /// attempts' starts (the retry budget admits retries as they came).
    pub fn run<'w>(
        &self,
        workflows: &'w [Workflow],
        limits_of: impl Fn(Option<&str>) -> &'w Limits,
    ) -> Vec<Replayed> {
        let limits: Vec<&Limits> = workflows.iter().map(|w| limits_of(w.name.as_deref())).collect();
        let mut states: Vec<State> = workflows.iter().map(|_| State::default()).collect();
        let mut budget_used: HashMap<(Option<&str>, i64), u64> = HashMap::new();
        if limits.iter().all(|l| l.retry_budget.is_none()) {
            // Nothing couples one workflow to another: each in turn.
            for ((workflow, limits), state) in workflows.iter().zip(&limits).zip(&mut states) {
                for index in 0..workflow.steps.len() {
                    self.step(workflow, index, limits, state, &mut budget_used);
                }
            }
        } else {
            // Attempts that started in the same microsecond are taken in
            // workflow id order, not stored order, so a batch or a
            // redelivery never changes who gets a minute's last retry.
            let mut queue: BinaryHeap<Reverse<(i64, &str, usize)>> = workflows
                .iter()
                .enumerate()
                .filter(|(_, w)| !w.steps.is_empty())
                .map(|(i, w)| Reverse((w.steps[0].start_us, w.id.as_str(), i)))
                .collect();
            while let Some(Reverse((_, id, w))) = queue.pop() {
                let workflow = &workflows[w];
                let state = &mut states[w];
                let index = state.next;
                self.step(workflow, index, limits[w], state, &mut budget_used);
                state.next += 1;
                if let Some(next) = workflow.steps.get(state.next) {
                    queue.push(Reverse((next.start_us, id, w)));
                }
            }
        }
        workflows
            .iter()
            .zip(states)
            .zip(limits)
            .map(|((w, s), l)| finish(w, s, l.queue_allowed == Some(false)))
            .collect()
    }

    fn step<'w>(
        &self,
        workflow: &'w Workflow,
        index: usize,
        limits: &Limits,
        state: &mut State,
        budget_used: &mut HashMap<(Option<&'w str>, i64), u64>,
    ) {
        let step = &workflow.steps[index];
        let end_recorded_before = state.latest_end_recorded;
        state.latest_end_recorded = state.latest_end_recorded.max(step.offset_ms + step.duration_ms);
        let last = index + 1 == workflow.steps.len();
        if state.ended {
            return;
        }
        if let Some((refused_nesting, refused_route)) = state.skipping {
            let n = nesting(step.layer);
            let goes_on = n > refused_nesting || (n == refused_nesting && step.route != refused_route);
            if !goes_on {
                return;
            }
        }
        let resumed = state.skipping.is_some();
        // A moved attempt starts after the kept ones ended, as long after
        // them as it started after the recorded ones.
        let offset_ms = if resumed {
            state.latest_end_kept + (step.offset_ms - end_recorded_before).max(0.0)
        } else {
            step.offset_ms - state.shift_ms
        };
        let minute = step.start_us.div_euclid(60_000_000);
        let verdict = match state.last_kept {
            None => Verdict::Keep,
            Some(previous) => {
                let previous = &workflow.steps[previous];
                match self.verdict(step, previous, offset_ms, limits, state) {
                    Verdict::Keep if self.over_budget(workflow, minute, limits, budget_used) => {
                        Verdict::GiveUp
                    }
                    verdict => verdict,
                }
            }
        };
        match verdict {
            Verdict::End => state.ended = true,
            Verdict::GiveUp => state.skipping = Some((nesting(step.layer), step.route)),
            Verdict::Keep => {
                if state.last_kept.is_some() && limits.retry_budget.is_some() {
                    *budget_used.entry((workflow.name.as_deref(), minute)).or_default() += 1;
                }
                if resumed {
                    state.moved = true;
                    state.shift_ms = step.offset_ms - offset_ms;
                }
                state.skipping = None;
                self.keep(workflow, index, offset_ms, state);
                state.last_kept_recorded = last;
            }
        }
    }

    /// Whether a kept retry would pass its minute's budget: retries a
    /// minute admits are the budget's ratio of its first attempts, or the
    /// floor, whichever is more.
    fn over_budget<'w>(
        &self,
        workflow: &'w Workflow,
        minute: i64,
        limits: &Limits,
        budget_used: &HashMap<(Option<&'w str>, i64), u64>,
    ) -> bool {
        let Some(ratio) = limits.retry_budget else { return false };
        let first = self.first_attempts.get(&(workflow.name.clone(), minute)).copied().unwrap_or(0);
        let admitted = ((ratio * first as f64).floor() as u64).max(limits.retry_budget_floor.unwrap_or(0));
        budget_used.get(&(workflow.name.as_deref(), minute)).copied().unwrap_or(0) >= admitted
    }

    fn verdict(
        &self,
        step: &Step,
        previous: &Step,
        offset_ms: f64,
        limits: &Limits,
        state: &State,
    ) -> Verdict {
        // The whole workflow's limits.
        if limits.max_total_attempts.is_some_and(|max| state.kept >= max)
            || limits.max_elapsed_ms.is_some_and(|max| offset_ms > max)
            || limits.max_extra_cost_pusd.is_some_and(|max| state.extra_pusd > max)
            || previous.failure.is_some_and(|class| listed(&limits.fail_closed_on, class))
            || limits
                .fail_closed_on_commit
                .as_ref()
                .is_some_and(|markers| state.markers.iter().any(|m| markers.contains(m)))
        {
            return Verdict::End;
        }
        // One layer's decision.
        let retry = step.route == previous.route;
        let layer = step.layer as usize;
        let refused = (retry && limits.max_retries[layer].is_some_and(|max| state.retries[layer] >= max))
            || limits.max_route_attempts.is_some_and(|max| {
                state.route_attempts.iter().find(|(r, _)| *r == step.route).map_or(0, |(_, n)| *n) >= max
            })
            || (retry
                && previous.failure.is_some_and(|class| {
                    limits.retryable.as_ref().is_some_and(|allowed| !allowed.contains(&class))
                        || listed(&limits.no_retry_on, class)
                }))
            || (step.on_fallback && limits.fallback == Some(false))
            || (step.on_fallback
                && !retry
                && limits
                    .fallback_on
                    .as_ref()
                    .is_some_and(|classes| !previous.failure.is_some_and(|class| classes.contains(&class))))
            || (step.on_fallback
                && limits.approved_fallbacks.as_ref().is_some_and(|approved| {
                    !approved.iter().any(|r| Some(r) == self.routes.get(step.route as usize))
                }))
            || (step.layer == Layer::Queue && limits.queue_allowed == Some(false));
        if refused { Verdict::GiveUp } else { Verdict::Keep }
    }

    fn keep(&self, workflow: &Workflow, index: usize, offset_ms: f64, state: &mut State) {
        let step = &workflow.steps[index];
        if let Some(previous) = state.last_kept {
            let n = nesting(step.layer);
            if step.route == workflow.steps[previous].route {
                state.retries[step.layer as usize] += 1;
            }
            // A new call of every layer inside this one.
            for inner in [Layer::Sdk, Layer::Gateway, Layer::App, Layer::Queue] {
                if nesting(inner) < n {
                    state.retries[inner as usize] = 0;
                }
            }
        }
        match state.route_attempts.iter_mut().find(|(r, _)| *r == step.route) {
            Some((_, n)) => *n += 1,
            None => state.route_attempts.push((step.route, 1)),
        }
        if let Some(marker) = step.commit {
            state.markers.push(marker);
        }
        state.kept += 1;
        state.tokens += step.tokens;
        state.cost_pusd += step.cost_pusd;
        state.unknown_cost_attempts += u64::from(step.cost_unknown);
        let end = offset_ms + step.duration_ms;
        state.latest_end_kept = state.latest_end_kept.max(end);
        if step.deliverable && state.delivered.is_none() {
            state.delivered = Some(index);
            state.delivered_end = Some(end);
        } else {
            state.extra_pusd += step.cost_pusd;
        }
        state.last_kept = Some(index);
    }
}

fn listed(classes: &Option<Vec<ErrorClass>>, class: ErrorClass) -> bool {
    classes.as_ref().is_some_and(|c| c.contains(&class))
}

/// The outcome rules over the kept attempts: delivered by the first
/// deliverable one; else, when the last recorded attempt was kept, what
/// its decision says (a queue the policy forbids fails closed); else
/// fail-closed (the replay stopped it).
fn finish(workflow: &Workflow, state: State, queue_forbidden: bool) -> Replayed {
    if state.kept == workflow.steps.len() as u64 && !(queue_forbidden && workflow.outcome == Outcome::Queued)
    {
        return Replayed::recorded(workflow);
    }
    by_the_rules(workflow, state, queue_forbidden)
}

/// `finish` without taking the recorded figures of a workflow kept whole.
fn by_the_rules(workflow: &Workflow, state: State, queue_forbidden: bool) -> Replayed {
    let outcome = match state.delivered {
        Some(0) => Outcome::PrimarySuccess,
        Some(d) if workflow.steps[d].on_fallback => Outcome::FallbackRecovery,
        Some(_) => Outcome::RetryRecovery,
        None if state.last_kept_recorded => match state.last_kept.and_then(|i| workflow.steps[i].decision) {
            Some(Decision::Degrade) => Outcome::Degraded,
            Some(Decision::Queue) if !queue_forbidden => Outcome::Queued,
            Some(Decision::Retry | Decision::Fallback) => Outcome::InFlight,
            _ => Outcome::FailClosed,
        },
        None => Outcome::FailClosed,
    };
    Replayed {
        outcome,
        outcome_ms: state.delivered_end.unwrap_or(state.latest_end_kept),
        attempts: state.kept,
        tokens: state.tokens,
        cost_pusd: state.cost_pusd,
        wasted_cost_pusd: state.extra_pusd,
        unknown_cost_attempts: state.unknown_cost_attempts,
        moved: state.moved,
    }
}

pub mod suggest;

#[cfg(test)]
mod tests;
