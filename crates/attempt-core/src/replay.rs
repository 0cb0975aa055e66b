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
//!
//! A replay decides a [`Plan`] per workflow (which attempts it keeps, how
//! the workflow ends), then prices it ([`Figures`]) and times it
//! ([`outcome_ms`]). Most limits read only what `shape` calls a workflow's
//! shape, so a replay under them decides once per shape.

use std::borrow::Borrow;
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

/// What a replay decides for one workflow: which of its recorded attempts
/// it keeps and how the workflow ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// By position in the workflow's order.
    pub kept: Vec<bool>,
    /// The kept attempt that delivers the workflow (the first deliverable one).
    pub delivered: Option<usize>,
    pub outcome: Outcome,
    /// An attempt was kept after a layer gave up: its result is recorded,
    /// its time moved earlier.
    pub moved: bool,
}

impl Plan {
    /// Every attempt kept and the recorded outcome: the workflow keeps its
    /// recorded figures.
    pub fn whole(&self, recorded: Outcome) -> bool {
        self.outcome == recorded && self.kept.iter().all(|k| *k)
    }
}

/// Attempts, tokens and known cost of a set of attempts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    pub attempts: i64,
    pub tokens: i128,
    pub cost_pusd: i128,
    /// Known cost of the attempts that did not deliver.
    pub wasted_cost_pusd: i128,
    pub unknown_cost_attempts: i64,
}

/// What one position adds to `Figures`: one attempt's, or the sum of a
/// position over many workflows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PositionSums {
    pub attempts: i64,
    pub tokens: i128,
    pub cost_pusd: i128,
    pub unknown_cost_attempts: i64,
}

impl From<&Step> for PositionSums {
    fn from(step: &Step) -> PositionSums {
        PositionSums {
            attempts: 1,
            tokens: step.tokens,
            cost_pusd: step.cost_pusd,
            unknown_cost_attempts: i64::from(step.cost_unknown),
        }
    }
}

impl Figures {
    /// The figures of the kept positions, `delivered` not wasted.
    pub fn kept(
        positions: impl IntoIterator<Item = PositionSums>,
        kept: &[bool],
        delivered: Option<usize>,
    ) -> Figures {
        let mut figures = Figures::default();
        for (index, (sums, _)) in positions.into_iter().zip(kept).enumerate().filter(|(_, (_, k))| **k) {
            figures.attempts += sums.attempts;
            figures.tokens += sums.tokens;
            figures.cost_pusd += sums.cost_pusd;
            figures.unknown_cost_attempts += sums.unknown_cost_attempts;
            if Some(index) != delivered {
                figures.wasted_cost_pusd += sums.cost_pusd;
            }
        }
        figures
    }
}

/// A workflow as the replay ends it.
#[derive(Debug, Clone, PartialEq)]
pub struct Replayed {
    pub outcome: Outcome,
    pub outcome_ms: f64,
    pub figures: Figures,
    /// An attempt was kept after a layer gave up: its result is recorded,
    /// its time moved earlier.
    pub moved: bool,
}

impl Replayed {
    /// The workflow as recorded (a replay under no limit).
    pub fn recorded(workflow: &Workflow) -> Replayed {
        let all = vec![true; workflow.steps.len()];
        Replayed {
            outcome: workflow.outcome,
            outcome_ms: workflow.outcome_ms,
            figures: Figures::kept(
                workflow.steps.iter().map(PositionSums::from),
                &all,
                workflow.steps.iter().position(|s| s.deliverable),
            ),
            moved: false,
        }
    }

    /// The workflow as `plan` replays it.
    pub fn of(workflow: &Workflow, plan: &Plan) -> Replayed {
        if plan.whole(workflow.outcome) {
            return Replayed::recorded(workflow);
        }
        Replayed {
            outcome: plan.outcome,
            outcome_ms: outcome_ms(plan, workflow.steps.iter().map(|s| (s.offset_ms, s.duration_ms))),
            figures: Figures::kept(workflow.steps.iter().map(PositionSums::from), &plan.kept, plan.delivered),
            moved: plan.moved,
        }
    }
}

/// Whether a step's outcome is a delivery.
pub fn is_success(outcome: Outcome) -> bool {
    matches!(outcome, Outcome::PrimarySuccess | Outcome::RetryRecovery | Outcome::FallbackRecovery)
}

/// The replayed time of one workflow. Kept attempts keep their recorded
/// spacing; the first one kept after a skip starts as long after the kept
/// attempts' latest end as it started after the recorded attempts' latest
/// end, and the kept attempts after it move by as much.
#[derive(Default)]
struct Clock {
    latest_end_recorded: f64,
    latest_end_kept: f64,
    /// Recorded start minus replayed start of the attempts kept since the
    /// last skip.
    shift_ms: f64,
    delivered_end: Option<f64>,
}

impl Clock {
    /// Takes in the next recorded attempt (every one, kept or not) and
    /// returns the start it has if kept, `resumed` after a skip.
    fn start(&mut self, offset_ms: f64, duration_ms: f64, resumed: bool) -> f64 {
        let end_recorded_before = self.latest_end_recorded;
        self.latest_end_recorded = end_recorded_before.max(offset_ms + duration_ms);
        if resumed {
            self.latest_end_kept + (offset_ms - end_recorded_before).max(0.0)
        } else {
            offset_ms - self.shift_ms
        }
    }

    fn keep(&mut self, offset_ms: f64, start_ms: f64, duration_ms: f64, resumed: bool, delivers: bool) {
        if resumed {
            self.shift_ms = offset_ms - start_ms;
        }
        let end = start_ms + duration_ms;
        self.latest_end_kept = self.latest_end_kept.max(end);
        if delivers && self.delivered_end.is_none() {
            self.delivered_end = Some(end);
        }
    }

    /// To the delivered attempt's end, else the kept attempts' latest end.
    fn outcome_ms(&self) -> f64 {
        self.delivered_end.unwrap_or(self.latest_end_kept)
    }
}

/// A workflow's time to outcome under `plan`, from its attempts' recorded
/// (offset, duration) in order: what the replay's clock says, without the
/// decisions (an attempt kept after one that was not is a resumption).
pub fn outcome_ms(plan: &Plan, times: impl IntoIterator<Item = (f64, f64)>) -> f64 {
    let mut clock = Clock::default();
    for (index, (offset_ms, duration_ms)) in times.into_iter().enumerate() {
        let kept = plan.kept.get(index).copied().unwrap_or(false);
        let resumed = kept && index > 0 && !plan.kept[index - 1];
        let start = clock.start(offset_ms, duration_ms, resumed);
        if kept {
            clock.keep(offset_ms, start, duration_ms, resumed, plan.delivered == Some(index));
        }
    }
    clock.outcome_ms()
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
    kept: Vec<bool>,
    kept_count: u64,
    /// Known cost of the kept attempts not delivered.
    extra_pusd: i128,
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
    clock: Clock,
}

enum Verdict {
    Keep,
    /// This layer gives up; an outer one may go on.
    GiveUp,
    /// The workflow ends.
    End,
}

impl Replay<'_> {
    /// Replays every workflow under `limits_of(name)`.
    pub fn run<'w>(
        &self,
        workflows: &'w [Workflow],
        limits_of: impl Fn(Option<&str>) -> &'w Limits,
    ) -> Vec<Replayed> {
        let plans = self.plans(workflows, limits_of);
        workflows.iter().zip(&plans).map(|(w, p)| Replayed::of(w, p)).collect()
    }

    /// Decides every workflow under `limits_of(name)`, in order of their
    /// attempts' starts (the retry budget admits retries as they came).
    pub fn plans<'w, W: Borrow<Workflow>>(
        &self,
        workflows: &'w [W],
        limits_of: impl Fn(Option<&str>) -> &'w Limits,
    ) -> Vec<Plan> {
        let workflow = |i: usize| -> &'w Workflow { workflows[i].borrow() };
        let limits: Vec<&Limits> =
            (0..workflows.len()).map(|i| limits_of(workflow(i).name.as_deref())).collect();
        let mut states: Vec<State> = (0..workflows.len()).map(|_| State::default()).collect();
        let mut budget_used: HashMap<(Option<&str>, i64), u64> = HashMap::new();
        if limits.iter().all(|l| l.retry_budget.is_none()) {
            // Nothing couples one workflow to another: each in turn.
            for (w, state) in states.iter_mut().enumerate() {
                for index in 0..workflow(w).steps.len() {
                    self.step(workflow(w), index, limits[w], state, &mut budget_used);
                }
            }
        } else {
            // Attempts that started in the same microsecond are taken in
            // workflow id order, not stored order, so a batch or a
            // redelivery never changes who gets a minute's last retry.
            let mut queue: BinaryHeap<Reverse<(i64, &str, usize)>> = (0..workflows.len())
                .filter_map(|i| {
                    let w = workflow(i);
                    w.steps.first().map(|first| Reverse((first.start_us, w.id.as_str(), i)))
                })
                .collect();
            while let Some(Reverse((_, id, w))) = queue.pop() {
                let state = &mut states[w];
                let index = state.next;
                self.step(workflow(w), index, limits[w], state, &mut budget_used);
                state.next += 1;
                if let Some(next) = workflow(w).steps.get(state.next) {
                    queue.push(Reverse((next.start_us, id, w)));
                }
            }
        }
        states
            .into_iter()
            .enumerate()
            .map(|(w, s)| finish(workflow(w), s, limits[w].queue_allowed == Some(false)))
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
        let resumed = state.skipping.is_some();
        // Every recorded attempt moves the recorded clock, kept or not.
        let offset_ms = state.clock.start(step.offset_ms, step.duration_ms, resumed);
        state.kept.push(false);
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
                state.moved |= resumed;
                state.skipping = None;
                self.keep(workflow, index, offset_ms, resumed, state);
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
        if limits.max_total_attempts.is_some_and(|max| state.kept_count >= max)
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
            || (step.on_fallback && (limits.fallback == Some(false) || limits.pinned == Some(true)))
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

    fn keep(&self, workflow: &Workflow, index: usize, offset_ms: f64, resumed: bool, state: &mut State) {
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
        state.kept[index] = true;
        state.kept_count += 1;
        let delivers = step.deliverable && state.delivered.is_none();
        state.clock.keep(step.offset_ms, offset_ms, step.duration_ms, resumed, delivers);
        if delivers {
            state.delivered = Some(index);
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
/// fail-closed (the replay stopped it). A workflow kept whole keeps its
/// recorded outcome.
fn finish(workflow: &Workflow, state: State, queue_forbidden: bool) -> Plan {
    let all_kept = state.kept_count == workflow.steps.len() as u64;
    let outcome = if all_kept && !(queue_forbidden && workflow.outcome == Outcome::Queued) {
        workflow.outcome
    } else {
        by_the_rules(workflow, &state, queue_forbidden)
    };
    Plan { kept: state.kept, delivered: state.delivered, outcome, moved: state.moved }
}

/// `finish`'s outcome without taking the recorded one of a workflow kept whole.
fn by_the_rules(workflow: &Workflow, state: &State, queue_forbidden: bool) -> Outcome {
    let last_recorded_kept = state.kept.last().copied().unwrap_or(false);
    match state.delivered {
        Some(0) => Outcome::PrimarySuccess,
        Some(d) if workflow.steps[d].on_fallback => Outcome::FallbackRecovery,
        Some(_) => Outcome::RetryRecovery,
        None if last_recorded_kept => match state.last_kept.and_then(|i| workflow.steps[i].decision) {
            Some(Decision::Degrade) => Outcome::Degraded,
            Some(Decision::Queue) if !queue_forbidden => Outcome::Queued,
            Some(Decision::Retry | Decision::Fallback) => Outcome::InFlight,
            _ => Outcome::FailClosed,
        },
        None => Outcome::FailClosed,
    }
}

pub mod shape;
pub mod suggest;

#[cfg(test)]
mod tests;
