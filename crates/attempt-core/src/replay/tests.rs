//! One case per limit where the replay changes the outcome and one where it
//! does not, on workflows written out attempt by attempt.

use super::*;
use crate::model::ErrorClass as C;
use crate::policy::LimitSet;

const ROUTES: [&str; 3] = ["openai/gpt-4o", "anthropic/claude", "backup"];

/// `spec`: one attempt per item, `layer:route:result[:decision]`, where
/// route is an index of ROUTES (0 the primary), result `ok` or an error
/// class; attempts start 1 s apart and last 100 ms, each costing 10 pUSD.
fn workflow(id: &str, spec: &str) -> Workflow {
    let steps: Vec<Step> = spec
        .split_whitespace()
        .enumerate()
        .map(|(i, item)| {
            let parts: Vec<&str> = item.split(':').collect();
            let failure = (parts[2] != "ok").then(|| parts[2].parse::<C>().unwrap());
            Step {
                start_us: 1_000_000 * i as i64,
                offset_ms: 1_000.0 * i as f64,
                duration_ms: 100.0,
                layer: parts[0].parse().unwrap(),
                route: parts[1].parse().unwrap(),
                on_fallback: parts[1] != "0",
                failure,
                deliverable: failure.is_none(),
                decision: parts.get(3).map(|d| d.parse().unwrap()),
                commit: (parts.get(4) == Some(&"committed")).then_some(CommitMarker::Committed),
                tokens: 5,
                cost_pusd: 10,
                cost_unknown: false,
            }
        })
        .collect();
    let mut recorded =
        Workflow { id: id.into(), name: None, outcome: Outcome::FailClosed, outcome_ms: 0.0, steps };
    // The recorded outcome and time by the same rules, nothing removed.
    let routes: Vec<String> = ROUTES.iter().map(|r| r.to_string()).collect();
    let first = HashMap::new();
    let mut under_no_limit = Replay { routes: &routes, first_attempts: &first }.run_unfinished(&recorded);
    recorded.outcome = under_no_limit.outcome;
    under_no_limit.moved = false;
    recorded.outcome_ms = under_no_limit.outcome_ms;
    recorded
}

fn replay(workflow: &Workflow, set: &str) -> Replayed {
    let limits =
        Limits::from_assignments(&set.split_whitespace().map(String::from).collect::<Vec<_>>()).unwrap();
    let routes: Vec<String> = ROUTES.iter().map(|r| r.to_string()).collect();
    let first = HashMap::from([((None, 0), 10)]);
    let set = LimitSet { default: limits, workflows: vec![] };
    Replay { routes: &routes, first_attempts: &first }
        .run(std::slice::from_ref(workflow), |name| set.for_workflow(name))
        .remove(0)
}

impl Replay<'_> {
    /// The replay of one workflow under no limit, without the shortcut that
    /// returns the recorded figures: what the tests' workflows record.
    fn run_unfinished(&self, workflow: &Workflow) -> Replayed {
        let limits = Limits::default();
        let mut state = State::default();
        let mut used = HashMap::new();
        for index in 0..workflow.steps.len() {
            self.step(workflow, index, &limits, &mut state, &mut used);
        }
        let plan = Plan {
            outcome: by_the_rules(workflow, &state, false),
            kept: state.kept,
            delivered: state.delivered,
            moved: state.moved,
        };
        Replayed {
            outcome: plan.outcome,
            outcome_ms: outcome_ms(&plan, workflow.steps.iter().map(|s| (s.offset_ms, s.duration_ms))),
            figures: Figures::kept(workflow.steps.iter().map(PositionSums::from), &plan.kept, plan.delivered),
            moved: plan.moved,
        }
    }
}

/// The attempts kept, the outcome, moved.
fn summary(r: &Replayed) -> (u64, Outcome, bool) {
    (r.figures.attempts as u64, r.outcome, r.moved)
}

const STORM: &str =
    "app:0:transient sdk:0:transient sdk:0:transient sdk:0:transient app:0:transient:retry sdk:0:ok";

#[test]
fn no_limit_keeps_the_recorded_workflow() {
    let w = workflow("w", STORM);
    assert_eq!(w.outcome, Outcome::RetryRecovery);
    assert_eq!(replay(&w, ""), Replayed::recorded(&w));
}

#[test]
fn max_total_attempts() {
    let w = workflow("w", STORM);
    assert_eq!(summary(&replay(&w, "max_total_attempts=3")), (3, Outcome::FailClosed, false));
    assert_eq!(summary(&replay(&w, "max_total_attempts=6")), (6, Outcome::RetryRecovery, false));
}

#[test]
fn max_retries_of_an_inner_layer_moves_the_outer_retry_earlier() {
    let w = workflow("w", STORM);
    let r = replay(&w, "max_retries.sdk=1");
    // app, sdk, (two sdk skipped), app moved, sdk: delivered.
    assert_eq!(summary(&r), (4, Outcome::RetryRecovery, true));
    // The app retry started 0.9 s after the last skipped attempt ended; it
    // moves to 0.9 s after the kept sdk retry ended (at 2.0 s), and its sdk
    // retry, 1 s later, delivers at 3.1 s.
    assert!((r.outcome_ms - 3_100.0).abs() < 1e-9, "{}", r.outcome_ms);
    assert_eq!(r.figures.wasted_cost_pusd, 30);
    assert_eq!(summary(&replay(&w, "max_retries.sdk=3")), (6, Outcome::RetryRecovery, false));
    // No outer layer to go on: the workflow ends.
    let sdk_only = workflow("s", "sdk:0:transient sdk:0:transient sdk:0:ok");
    assert_eq!(summary(&replay(&sdk_only, "max_retries.sdk=1")), (2, Outcome::FailClosed, false));
}

#[test]
fn max_retries_of_the_outer_layer_goes_on_at_its_fallback() {
    let w = workflow("w", "app:0:rate_limit app:0:rate_limit app:0:rate_limit app:1:ok");
    assert_eq!(summary(&replay(&w, "max_retries.app=1")), (3, Outcome::FallbackRecovery, true));
    assert_eq!(summary(&replay(&w, "max_retries.app=2")), (4, Outcome::FallbackRecovery, false));
    assert_eq!(summary(&replay(&w, "max_retries.app=0")), (2, Outcome::FallbackRecovery, true));
}

#[test]
fn max_route_attempts() {
    let w = workflow("w", "app:0:transient app:0:transient app:0:ok");
    assert_eq!(summary(&replay(&w, "max_route_attempts=2")), (2, Outcome::FailClosed, false));
    assert_eq!(summary(&replay(&w, "max_route_attempts=3")), (3, Outcome::RetryRecovery, false));
}

#[test]
fn max_elapsed_ms() {
    let w = workflow("w", "app:0:transient app:0:transient app:0:ok");
    assert_eq!(summary(&replay(&w, "max_elapsed_ms=1500")), (2, Outcome::FailClosed, false));
    assert_eq!(summary(&replay(&w, "max_elapsed_ms=2000")), (3, Outcome::RetryRecovery, false));
}

#[test]
fn max_extra_cost_usd() {
    // 10 pUSD an attempt: 20 pUSD wasted before the third.
    let w = workflow("w", "app:0:transient app:0:transient app:0:ok");
    assert_eq!(summary(&replay(&w, "max_extra_cost_usd=0.000000000015")), (2, Outcome::FailClosed, false));
    assert_eq!(summary(&replay(&w, "max_extra_cost_usd=0.00000000002")), (3, Outcome::RetryRecovery, false));
}

#[test]
fn retryable_and_no_retry_on() {
    let w = workflow("w", "app:0:quota app:0:quota app:1:ok");
    assert_eq!(summary(&replay(&w, "no_retry_on=quota")), (2, Outcome::FallbackRecovery, true));
    assert_eq!(summary(&replay(&w, "no_retry_on=auth,request")), (3, Outcome::FallbackRecovery, false));
    assert_eq!(summary(&replay(&w, "retryable=transient")), (2, Outcome::FallbackRecovery, true));
    assert_eq!(summary(&replay(&w, "retryable=quota")), (3, Outcome::FallbackRecovery, false));
    let no_fallback = workflow("n", "app:0:quota app:0:ok");
    assert_eq!(summary(&replay(&no_fallback, "no_retry_on=quota")), (1, Outcome::FailClosed, false));
}

#[test]
fn fail_closed_on_and_on_commit() {
    let w = workflow("w", "app:0:auth app:1:ok");
    assert_eq!(summary(&replay(&w, "fail_closed_on=auth")), (1, Outcome::FailClosed, false));
    assert_eq!(summary(&replay(&w, "fail_closed_on=quota")), (2, Outcome::FallbackRecovery, false));
    let committed = workflow("c", "app:0:timeout:retry:committed app:0:ok");
    assert_eq!(
        summary(&replay(&committed, "fail_closed_on_commit=committed")),
        (1, Outcome::FailClosed, false)
    );
    assert_eq!(
        summary(&replay(&committed, "fail_closed_on_commit=visible_output")),
        (2, Outcome::RetryRecovery, false)
    );
}

#[test]
fn fallback_rules() {
    let w = workflow("w", "app:0:rate_limit app:1:ok");
    assert_eq!(summary(&replay(&w, "fallback=false")), (1, Outcome::FailClosed, false));
    assert_eq!(summary(&replay(&w, "fallback=true")), (2, Outcome::FallbackRecovery, false));
    assert_eq!(summary(&replay(&w, "fallback_on=transient")), (1, Outcome::FailClosed, false));
    assert_eq!(summary(&replay(&w, "fallback_on=rate_limit")), (2, Outcome::FallbackRecovery, false));
    let two = workflow("t", "app:0:rate_limit app:1:transient app:2:ok");
    assert_eq!(summary(&replay(&two, "approved_fallbacks=backup")), (2, Outcome::FallbackRecovery, true));
    assert_eq!(
        summary(&replay(&two, "approved_fallbacks=anthropic/claude")),
        (2, Outcome::FailClosed, false)
    );
    assert_eq!(
        summary(&replay(&two, "approved_fallbacks=anthropic/claude,backup")),
        (3, Outcome::FallbackRecovery, false)
    );
}

#[test]
fn queue_allowed() {
    let w = workflow("w", "app:0:transient queue:0:ok");
    assert_eq!(summary(&replay(&w, "queue_allowed=false")), (1, Outcome::FailClosed, false));
    assert_eq!(summary(&replay(&w, "queue_allowed=true")), (2, Outcome::RetryRecovery, false));
    let queued = workflow("q", "app:0:transient app:0:transient:queue");
    assert_eq!(queued.outcome, Outcome::Queued);
    assert_eq!(summary(&replay(&queued, "queue_allowed=false")), (2, Outcome::FailClosed, false));
}

#[test]
fn retry_budget_admits_retries_in_order_of_start() {
    // 10 first attempts in minute 0 (the test's table); a budget of 0.2
    // admits 2 retries in it.
    let routes: Vec<String> = ROUTES.iter().map(|r| r.to_string()).collect();
    let first = HashMap::from([((None, 0), 10)]);
    let workflows: Vec<Workflow> = (0..3)
        .map(|i| {
            let mut w = workflow(&format!("w{i}"), "app:0:transient app:0:ok");
            for s in &mut w.steps {
                s.start_us += i * 1_000;
            }
            w
        })
        .collect();
    let limits = Limits::from_assignments(&["retry_budget=0.2".into()]).unwrap();
    let set = LimitSet { default: limits, workflows: vec![] };
    let replayed =
        Replay { routes: &routes, first_attempts: &first }.run(&workflows, |name| set.for_workflow(name));
    let outcomes: Vec<_> = replayed.iter().map(|r| r.outcome).collect();
    assert_eq!(outcomes, [Outcome::RetryRecovery, Outcome::RetryRecovery, Outcome::FailClosed]);
    let set = LimitSet {
        default: Limits::from_assignments(&["retry_budget=0.3".into()]).unwrap(),
        workflows: vec![],
    };
    let replayed =
        Replay { routes: &routes, first_attempts: &first }.run(&workflows, |name| set.for_workflow(name));
    assert!(replayed.iter().all(|r| r.outcome == Outcome::RetryRecovery));
}

#[test]
fn retries_that_start_together_are_admitted_by_workflow_id_whatever_the_stored_order() {
    // Two retries in the same microsecond, one admitted (10 first attempts,
    // a budget of 0.1): the lower id's, in either order of the workflows.
    let routes: Vec<String> = ROUTES.iter().map(|r| r.to_string()).collect();
    let first = HashMap::from([((None, 0), 10)]);
    let set = LimitSet {
        default: Limits::from_assignments(&["retry_budget=0.1".into()]).unwrap(),
        workflows: vec![],
    };
    let a = workflow("a", "app:0:transient app:0:ok");
    let b = workflow("b", "app:0:transient app:0:ok");
    for workflows in [vec![a.clone(), b.clone()], vec![b, a]] {
        let replayed =
            Replay { routes: &routes, first_attempts: &first }.run(&workflows, |name| set.for_workflow(name));
        let by_id: HashMap<&str, Outcome> =
            workflows.iter().zip(&replayed).map(|(w, r)| (w.id.as_str(), r.outcome)).collect();
        assert_eq!(by_id["a"], Outcome::RetryRecovery);
        assert_eq!(by_id["b"], Outcome::FailClosed);
    }
}

#[test]
fn assignments_name_what_is_wrong() {
    let err = |a: &str| Limits::from_assignments(&[a.to_string()]).unwrap_err().to_string();
    assert!(err("max_total_attempts").contains("is not KEY=VALUE"));
    assert!(err("max_total_attempts=0").contains("1 or more"));
    assert!(err("no_retry_on=flaky").contains("`no_retry_on`: \"flaky\" is not one of"));
    assert!(err("max_retries.robot=2").contains("`max_retries`: \"robot\" is not one of"));
    assert!(err("max_tries=2").contains("unknown field `max_tries`"));
    // A value cannot reach past its own line, nor a key be given twice.
    let injected = err("max_total_attempts=3\nretryable = []");
    assert!(injected.contains("one line without control characters"), "{injected}");
    let twice = Limits::from_assignments(&["max_retries.sdk=2".into(), "max_retries.sdk=3".into()])
        .unwrap_err()
        .to_string();
    assert!(twice.contains("`max_retries.sdk` is set twice"), "{twice}");
    for huge in
        ["max_total_attempts=1e400", "max_elapsed_ms=inf", "max_elapsed_ms=nan", "max_extra_cost_usd=-1"]
    {
        assert!(Limits::from_assignments(&[huge.to_string()]).is_err(), "{huge} is refused");
    }
    let limits = Limits::from_assignments(&["max_retries.sdk=2".into(), "no_retry_on=quota".into()]).unwrap();
    assert_eq!(limits.max_retries[Layer::Sdk as usize], Some(2));
    assert_eq!(limits.no_retry_on, Some(vec![C::Quota]));
}

mod shapes {
    //! Under limits that read only shapes, a workflow's plan is its shape's.

    use proptest::prelude::*;

    use super::*;
    use crate::replay::shape::{Shape, reads_only_shapes};

    const CLASSES: [C; 5] = [C::RateLimit, C::Transient, C::Timeout, C::Quota, C::Auth];
    const LIMITS: [&str; 11] = [
        "max_retries.sdk=1",
        "max_retries.app=0",
        "max_route_attempts=2",
        "max_total_attempts=3",
        "no_retry_on=quota",
        "retryable=transient,rate_limit",
        "fallback=false",
        "fallback_on=rate_limit",
        "fail_closed_on=auth",
        "queue_allowed=false",
        "approved_fallbacks=backup",
    ];

    /// One attempt's draws: layer, route, failure class, decision, gap
    /// before it and duration (ms), tokens.
    type Draw = (u8, u8, Option<u8>, u8, u16, u16, u8);

    /// Steps from draws, at their own times and costs.
    fn steps(draws: &[Draw]) -> Vec<Step> {
        let mut offset = 0.0;
        draws
            .iter()
            .map(|&(layer, route, failure, decision, gap, duration, tokens)| {
                offset += f64::from(gap);
                let failure = failure.map(|c| CLASSES[usize::from(c) % CLASSES.len()]);
                let decision = [None, Some(Decision::Retry), Some(Decision::Queue), Some(Decision::Degrade)]
                    [usize::from(decision) % 4];
                Step {
                    start_us: (offset * 1000.0) as i64,
                    offset_ms: offset,
                    duration_ms: f64::from(duration),
                    layer: [Layer::Sdk, Layer::App, Layer::Queue][usize::from(layer) % 3],
                    route: u32::from(route % 3),
                    on_fallback: route % 3 != 0,
                    failure,
                    // As facts.sql: an answer the caller did not retry or fall back from.
                    deliverable: failure.is_none() && decision != Some(Decision::Retry),
                    decision,
                    commit: None,
                    tokens: i128::from(tokens),
                    cost_pusd: i128::from(tokens) * 3,
                    cost_unknown: tokens % 7 == 0,
                }
            })
            .collect()
    }

    /// What a shape limit sees of a step.
    fn seen(s: &Step) -> (Layer, u32, bool, Option<C>, bool, Option<Decision>) {
        (s.layer, s.route, s.on_fallback, s.failure, s.deliverable, s.decision)
    }

    proptest! {
        #[test]
        fn a_shape_replays_as_its_workflows_do(
            draws in prop::collection::vec(
                prop::collection::vec((0u8..2, 0u8..3, prop::option::of(0u8..3), 0u8..4, 0u16..3000, 0u16..2000, 0u8..50), 2..5),
                1..80),
            chosen in prop::sample::subsequence(LIMITS.to_vec(), 1..4),
        ) {
            let routes: Vec<String> = ROUTES.iter().map(|r| r.to_string()).collect();
            let first = HashMap::new();
            let replay = Replay { routes: &routes, first_attempts: &first };
            let mut recorded: Vec<Workflow> = Vec::new();
            for (i, d) in draws.iter().enumerate() {
                let mut w = workflow(&format!("w{i}"), "app:0:ok");
                w.steps = steps(d);
                let r = replay.run_unfinished(&w);
                w.outcome = r.outcome;
                w.outcome_ms = r.outcome_ms;
                recorded.push(w);
            }
            let set: Vec<String> = chosen.iter().map(|l| l.to_string()).collect();
            let limits = LimitSet { default: Limits::from_assignments(&set).unwrap(), workflows: vec![] };
            prop_assert!(reads_only_shapes(&limits));
            let plans = replay.plans(&recorded, |name| limits.for_workflow(name));

            let mut shapes: Vec<Shape> = Vec::new();
            let mut shape_of = Vec::new();
            for w in &recorded {
                let same = shapes.iter().position(|s| {
                    s.workflow.outcome == w.outcome
                        && s.workflow.steps.len() == w.steps.len()
                        && s.workflow.steps.iter().zip(&w.steps).all(|(a, b)| seen(a) == seen(b))
                });
                shape_of.push(same.unwrap_or(shapes.len()));
                match same {
                    Some(s) => shapes[s].workflows += 1,
                    None => shapes.push(Shape { workflow: w.clone(), workflows: 1 }),
                }
            }
            let shape_plans = replay.plans(&shapes.iter().map(|s| &s.workflow).collect::<Vec<_>>(), |name| limits.for_workflow(name));
            for ((w, plan), s) in recorded.iter().zip(&plans).zip(shape_of) {
                prop_assert_eq!(plan, &shape_plans[s], "{}", w.id);
                // The clock without the decisions tells the same time.
                let replayed = Replayed::of(w, plan);
                if !plan.whole(w.outcome) {
                    prop_assert_eq!(replayed.outcome_ms,
                        outcome_ms(plan, w.steps.iter().map(|s| (s.offset_ms, s.duration_ms))));
                }
            }
        }
    }
}
