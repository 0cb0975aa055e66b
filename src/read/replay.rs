//! A replay's reads, in the snapshot of its `tune` answer. Under limits
//! that read only shapes (`attempt_core::replay::shape`), each shape of the
//! window is decided once and the store sums what each plan keeps; only
//! the workflows a plan changes are read one by one, for their times.
//! Workflows of a shape that cannot be summed (two shapes sharing a key,
//! or longer than a plan's mask) and every workflow under a limit of time,
//! cost or retry budget are replayed from their own steps.

use std::collections::HashMap;

use crate::report::tune::{ReplayFigures, SUCCESS_LOST_EXAMPLES};
use crate::store::StoreError;
use crate::store::tune::{ChangedWorkflow, PlanRow, ReplaySum, Shapes, TuneScope};
use attempt_core::model::Outcome;
use attempt_core::policy::LimitSet;
use attempt_core::replay::shape::{Shape, Tally, kept_bits, reads_only_shapes};
use attempt_core::replay::suggest::Suggested;
use attempt_core::replay::{Figures, Plan, Replay, Replayed, Workflow, is_success, outcome_ms};

pub fn replay(snapshot: &TuneScope, limits: &LimitSet) -> Result<ReplayFigures, StoreError> {
    let no_budget = HashMap::new();
    if !reads_only_shapes(limits) {
        let with_budget = limits.sections().any(|l| l.retry_budget.is_some());
        let rows = snapshot.steps(with_budget, false)?;
        let mut figures = ReplayFigures { unchanged_ms: rows.single_outcome_ms, ..ReplayFigures::default() };
        let replay = Replay { routes: &rows.routes, first_attempts: &rows.first_attempts };
        one_by_one(&replay, &rows.workflows, limits, &mut figures);
        return Ok(figures);
    }
    let began = std::time::Instant::now();
    let mut shapes = snapshot.shapes()?;
    let routes = route_names(snapshot, limits, &mut shapes)?;
    let pairs = sections(snapshot, limits, &shapes)?;
    // The engine reads each pair's shape under its section's name.
    let named: Vec<Workflow> = if limits.workflows.is_empty() {
        Vec::new()
    } else {
        pairs
            .iter()
            .map(|&(section, i)| Workflow { name: section_name(limits, section), ..shapes.shapes[i].clone() })
            .collect()
    };
    let engine = Replay { routes: &routes, first_attempts: &no_budget };
    let plans = if named.is_empty() {
        engine.plans(&shapes.shapes, |name| limits.for_workflow(name))
    } else {
        engine.plans(&named, |name| limits.for_workflow(name))
    };
    let mut rows = Vec::with_capacity(plans.len());
    for (&(section, i), plan) in pairs.iter().zip(&plans) {
        rows.push(plan_row(section, shapes.keys[i], &shapes.shapes[i], plan)?);
    }
    snapshot.set_plans(&rows)?;
    let decided_at = began.elapsed();

    let mut figures = ReplayFigures { tally: tally(&snapshot.replay_sums()?)?, ..ReplayFigures::default() };
    let summed_at = began.elapsed();
    let malformed = |what| StoreError::Malformed { file: "read/replay.rs", what };
    let counts = snapshot.outcome_counts()?;
    figures.unchanged_ms = counts.unchanged_ms;
    let changed = snapshot.for_each_changed(|w: ChangedWorkflow| {
        let plan = plans.get(w.plan).ok_or(malformed("a changed workflow of no plan"))?;
        if w.offsets_ms.len() != plan.kept.len() || w.durations_ms.len() != plan.kept.len() {
            return Err(malformed("a workflow's times do not match its shape's length"));
        }
        figures.changed_before_ms.push(w.outcome_ms);
        figures
            .changed_after_ms
            .push(outcome_ms(plan, w.offsets_ms.iter().copied().zip(w.durations_ms.iter().copied())));
        Ok(())
    })?;
    if changed != counts.changed {
        return Err(malformed("the changed workflows read are not those counted"));
    }
    figures.lost_examples = snapshot.lost_examples(SUCCESS_LOST_EXAMPLES)?;
    let timed_at = began.elapsed();

    let mut apart_workflows = 0;
    if !shapes.apart.is_empty() {
        let apart = snapshot.steps(false, true)?;
        let engine = Replay { routes: &apart.routes, first_attempts: &no_budget };
        one_by_one(&engine, &apart.workflows, limits, &mut figures);
        apart_workflows = apart.workflows.len() as u64;
    }
    // Every workflow in scope is timed once: as recorded, changed, or apart.
    if apart_workflows != counts.undecided {
        return Err(malformed("the workflows set apart are not those with no plan"));
    }
    tracing::debug!(
        shapes = shapes.shapes.len(),
        apart = shapes.apart.len(),
        decided_ms = decided_at.as_millis() as u64,
        summed_ms = (summed_at - decided_at).as_millis() as u64,
        timed_ms = (timed_at - summed_at).as_millis() as u64,
        elapsed_ms = began.elapsed().as_millis() as u64,
        "replayed by shape"
    );
    Ok(figures)
}

/// `tune --suggest`: for each workflow name, the smallest limits within
/// `tolerance_pp` (`attempt_core::replay::suggest`, whose limits read only
/// shapes), and what they save.
pub fn suggest(
    snapshot: &TuneScope,
    totals: &HashMap<Option<String>, u64>,
    tolerance_pp: f64,
) -> Result<Vec<(Suggested, Figures)>, StoreError> {
    let shapes = snapshot.shapes()?;
    let index: HashMap<u64, usize> = shapes.keys.iter().enumerate().map(|(i, k)| (*k, i)).collect();
    let (mut named, keys): (Vec<Shape>, Vec<u64>) = snapshot
        .shape_counts()?
        .into_iter()
        .filter_map(|c| {
            let shape = Shape {
                workflow: Workflow {
                    name: c.workflow_name,
                    ..shapes.shapes[*index.get(&c.shape_key)?].clone()
                },
                workflows: u64::try_from(c.workflows).unwrap_or(0),
            };
            Some((shape, c.shape_key))
        })
        .unzip();
    let mut apart = Vec::new();
    if !shapes.apart.is_empty() {
        let listed: Vec<PlanRow> = shapes
            .keys
            .iter()
            .zip(&shapes.shapes)
            .map(|(key, shape)| plan_row(0, *key, shape, &whole_plan(shape)))
            .collect::<Result<_, _>>()?;
        snapshot.set_plans(&listed)?;
        apart = snapshot.steps(false, true)?.workflows;
        named.extend(apart.iter().cloned().map(|workflow| Shape { workflow, workflows: 1 }));
    }
    // Routes only matter to approved fallbacks, which a suggestion never sets.
    let no_budget = HashMap::new();
    let engine = Replay { routes: &[], first_attempts: &no_budget };
    let suggested = attempt_core::replay::suggest::suggest(&engine, named.clone(), totals, tolerance_pp);

    // What each name's limits save, summed by the store like a replay's.
    let names: Vec<String> = suggested.iter().filter_map(|s| s.name.clone()).collect();
    snapshot.set_sections(&names)?;
    let section_of = |name: Option<&str>| {
        name.and_then(|n| names.iter().position(|m| m == n))
            .map_or(0, |i| i32::try_from(i + 1).unwrap_or(i32::MAX))
    };
    let limits_of =
        |name: Option<&str>| suggested.iter().find(|s| s.name.as_deref() == name).map(|s| &s.limits);
    let mut rows = Vec::new();
    for (shape, key) in named.iter().zip(keys) {
        let Some(limits) = limits_of(shape.workflow.name.as_deref()) else { continue };
        let plan = engine.plans(std::slice::from_ref(&shape.workflow), |_| limits).remove(0);
        rows.push(plan_row(section_of(shape.workflow.name.as_deref()), key, &shape.workflow, &plan)?);
    }
    snapshot.set_plans(&rows)?;
    let sums = snapshot.replay_sums()?;
    let mut out = Vec::with_capacity(suggested.len());
    for s in suggested {
        let section = section_of(s.name.as_deref());
        let mut tally = tally(&sums.iter().filter(|r| r.section == section).cloned().collect::<Vec<_>>())?;
        for workflow in apart.iter().filter(|w| w.name == s.name) {
            let plan = engine.plans(std::slice::from_ref(workflow), |_| &s.limits).remove(0);
            tally.add(
                workflow.outcome,
                &plan,
                Replayed::recorded(workflow).figures,
                Replayed::of(workflow, &plan).figures,
            );
        }
        out.push((s, tally.figures));
    }
    Ok(out)
}

/// A plan that keeps a shape whole.
fn whole_plan(shape: &Workflow) -> Plan {
    Plan {
        kept: vec![true; shape.steps.len()],
        delivered: shape.steps.iter().position(|s| s.deliverable),
        outcome: shape.outcome,
        moved: false,
    }
}

fn plan_row(section: i32, shape_key: u64, shape: &Workflow, plan: &Plan) -> Result<PlanRow, StoreError> {
    let place = |i: usize| i32::try_from(i).ok();
    Ok(PlanRow {
        section,
        shape_key,
        changed: !plan.whole(shape.outcome),
        lost: is_success(shape.outcome) && !is_success(plan.outcome),
        moved: plan.moved,
        kept: kept_bits(plan)
            .ok_or(StoreError::Malformed { file: "read/replay.rs", what: "a shape too long" })?,
        delivered: plan.delivered.and_then(place),
        recorded_delivered: shape.steps.iter().position(|s| s.deliverable).and_then(place),
        recorded_outcome: shape.outcome as i32,
        outcome: plan.outcome as i32,
    })
}

/// The tally of `tune_replay.sql`'s rows: the workflows of each changed
/// shape (their first attempts) by recorded and replayed outcome, and the
/// figures of the attempts kept against all of them.
fn tally(sums: &[ReplaySum]) -> Result<Tally, StoreError> {
    let outcome = |place: i32| {
        <Outcome as strum::VariantNames>::VARIANTS
            .get(usize::try_from(place).unwrap_or(usize::MAX))
            .and_then(|name| name.parse::<Outcome>().ok())
            .ok_or(StoreError::Malformed { file: "tune_replay.sql", what: "an outcome not in the list" })
    };
    let mut tally = Tally::default();
    let (mut recorded, mut replayed) = (Figures::default(), Figures::default());
    for r in sums {
        if r.first {
            tally.count(
                outcome(r.recorded_outcome)?,
                outcome(r.outcome)?,
                r.moved,
                u64::try_from(r.attempts).unwrap_or(0),
            );
        }
        let add = |f: &mut Figures, wasted: bool| {
            f.attempts += r.attempts;
            f.tokens += r.tokens;
            f.cost_pusd += r.cost_pusd;
            f.unknown_cost_attempts += r.unknown_cost_attempts;
            if wasted {
                f.wasted_cost_pusd += r.cost_pusd;
            }
        };
        add(&mut recorded, !r.delivered);
        if r.kept {
            add(&mut replayed, !r.delivers);
        }
    }
    tally.figures(recorded, replayed);
    Ok(tally)
}

/// Route numbers made global (`Replay::routes`) when a section approves
/// fallbacks by route key; otherwise each shape's own numbers serve (a
/// replay only compares a workflow's routes with each other).
fn route_names(
    snapshot: &TuneScope,
    limits: &LimitSet,
    shapes: &mut Shapes,
) -> Result<Vec<String>, StoreError> {
    let approves = limits.sections().any(|l| l.approved_fallbacks.is_some());
    if !approves {
        return Ok(Vec::new());
    }
    let names = snapshot.shape_routes()?;
    let mut routes: Vec<String> = Vec::new();
    let mut places: HashMap<String, u32> = HashMap::new();
    for (shape, key) in shapes.shapes.iter_mut().zip(&shapes.keys) {
        for step in &mut shape.steps {
            let name = names.get(&(*key, step.route)).cloned().unwrap_or_default();
            step.route = *places.entry(name.clone()).or_insert_with(|| {
                routes.push(name);
                routes.len() as u32 - 1
            });
        }
    }
    Ok(routes)
}

/// The (section, shape index) pairs in scope: every shape under
/// `[default]`, or by the sections of the names that have it.
fn sections(
    snapshot: &TuneScope,
    limits: &LimitSet,
    shapes: &Shapes,
) -> Result<Vec<(i32, usize)>, StoreError> {
    if limits.workflows.is_empty() {
        return Ok((0..shapes.shapes.len()).map(|i| (0, i)).collect());
    }
    let index: HashMap<u64, usize> = shapes.keys.iter().enumerate().map(|(i, k)| (*k, i)).collect();
    let mut pairs: Vec<(i32, usize)> = snapshot
        .shape_counts()?
        .iter()
        .filter_map(|c| index.get(&c.shape_key).map(|&i| (section(limits, c.workflow_name.as_deref()), i)))
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    Ok(pairs)
}

/// Replays `workflows` one by one into `figures`.
fn one_by_one(replay: &Replay, workflows: &[Workflow], limits: &LimitSet, figures: &mut ReplayFigures) {
    let plans = replay.plans(workflows, |name| limits.for_workflow(name));
    for (workflow, plan) in workflows.iter().zip(&plans) {
        let recorded = Replayed::recorded(workflow);
        if plan.whole(workflow.outcome) {
            figures.unchanged_ms.push((recorded.outcome_ms, 1));
            continue;
        }
        let replayed = Replayed::of(workflow, plan);
        figures.tally.add(workflow.outcome, plan, recorded.figures, replayed.figures);
        figures.changed_before_ms.push(recorded.outcome_ms);
        figures.changed_after_ms.push(replayed.outcome_ms);
        if is_success(workflow.outcome) && !is_success(plan.outcome) {
            figures.lost_examples.push(workflow.id.clone());
        }
    }
    figures.lost_examples.sort();
    figures.lost_examples.truncate(SUCCESS_LOST_EXAMPLES);
}

/// The policy section a workflow name replays under: the place of its
/// `[[workflow]]` from 1, 0 for `[default]` (`store::tune::PlanRow`).
fn section(limits: &LimitSet, name: Option<&str>) -> i32 {
    name.and_then(|name| limits.workflows.iter().position(|(n, _)| n == name))
        .map_or(0, |i| i32::try_from(i + 1).unwrap_or(i32::MAX))
}

/// The name of section `section` (`None` for `[default]`).
fn section_name(limits: &LimitSet, section: i32) -> Option<String> {
    usize::try_from(section)
        .ok()
        .and_then(|s| s.checked_sub(1))
        .and_then(|i| limits.workflows.get(i))
        .map(|(n, _)| n.clone())
}
