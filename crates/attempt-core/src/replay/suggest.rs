//! `tune --suggest`: for each workflow name, the smallest limits whose
//! replay keeps its success within a tolerance of the recorded one. Layer by
//! layer from the inside out, the fewest retries each layer may make; then
//! the fewest classes after which it may fall back. Each choice is replayed
//! together with the ones made before it, so the whole suggestion, not each
//! limit alone, stays within the tolerance.

use std::collections::{BTreeMap, HashMap};

use super::shape::Shape;
use super::{Replay, is_success, nesting};
use crate::model::{ErrorClass, Layer};
use crate::policy::Limits;

/// The suggestion for one workflow name (what it saves is summed by the
/// caller, like any replay's figures).
#[derive(Debug, Clone, PartialEq)]
pub struct Suggested {
    pub name: Option<String>,
    pub limits: Limits,
    /// Workflows of this name in scope (one attempt or more).
    pub workflows: u64,
    pub success_lost: u64,
}

/// `shapes` are the retried workflows in scope, by shape and name (the
/// limits it tries read nothing else); `totals` every workflow's count by
/// name (the share of success lost is of these).
pub fn suggest(
    replay: &Replay,
    shapes: Vec<Shape>,
    totals: &HashMap<Option<String>, u64>,
    tolerance_pp: f64,
) -> Vec<Suggested> {
    let mut by_name: BTreeMap<Option<String>, Vec<Shape>> = BTreeMap::new();
    for s in shapes {
        by_name.entry(s.workflow.name.clone()).or_default().push(s);
    }
    by_name
        .into_iter()
        .map(|(name, list)| {
            let retried: u64 = list.iter().map(|s| s.workflows).sum();
            let total = totals.get(&name).copied().unwrap_or(retried).max(retried);
            one_name(replay, name, &list, total, tolerance_pp)
        })
        .collect()
}

fn one_name(
    replay: &Replay,
    name: Option<String>,
    list: &[Shape],
    total: u64,
    tolerance_pp: f64,
) -> Suggested {
    let allowed_loss = (tolerance_pp / 100.0 * total as f64).floor() as u64;
    let workflows: Vec<&super::Workflow> = list.iter().map(|s| &s.workflow).collect();
    let lost = |limits: &Limits| -> u64 {
        list.iter()
            .zip(replay.plans(&workflows, |_| limits))
            .filter(|(s, plan)| is_success(s.workflow.outcome) && !is_success(plan.outcome))
            .map(|(s, _)| s.workflows)
            .sum()
    };
    let mut limits = Limits::default();
    let mut layers: Vec<Layer> = [Layer::Sdk, Layer::Gateway, Layer::App, Layer::Queue].to_vec();
    layers.sort_by_key(|l| nesting(*l));
    for layer in layers {
        let most = most_retries(list, layer);
        if most == 0 {
            continue;
        }
        for limit in 0..most {
            let mut candidate = limits.clone();
            candidate.max_retries[layer as usize] = Some(limit);
            if lost(&candidate) <= allowed_loss {
                limits = candidate;
                break;
            }
        }
    }
    // Fallback classes: start from every class a fallback followed, drop
    // the ones whose fallbacks rescue least first.
    let classes = fallback_classes(list);
    if !classes.is_empty() {
        let mut kept: Vec<ErrorClass> = classes.iter().map(|(c, _)| *c).collect();
        for (class, _) in &classes {
            let mut candidate = limits.clone();
            candidate.fallback_on = Some(kept.iter().copied().filter(|c| c != class).collect());
            if lost(&candidate) <= allowed_loss {
                kept.retain(|c| c != class);
                limits = candidate;
            }
        }
    }
    Suggested { name, success_lost: lost(&limits), limits, workflows: total }
}

/// The most retries `layer` made in one call of the layers outside it.
fn most_retries(list: &[Shape], layer: Layer) -> u64 {
    let mut most = 0;
    for w in list.iter().map(|s| &s.workflow) {
        let mut run = 0u64;
        for (i, step) in w.steps.iter().enumerate().skip(1) {
            let n = nesting(step.layer);
            if n > nesting(layer) {
                run = 0;
            } else if step.layer == layer && step.route == w.steps[i - 1].route {
                run += 1;
                most = most.max(run);
            }
        }
    }
    most
}

/// The classes after which a workflow moved onto a fallback route, with
/// how many workflows those fallbacks delivered, fewest first.
fn fallback_classes(list: &[Shape]) -> Vec<(ErrorClass, u64)> {
    let mut classes: Vec<(ErrorClass, u64)> = Vec::new();
    for (w, workflows) in list.iter().map(|s| (&s.workflow, s.workflows)) {
        for (i, step) in w.steps.iter().enumerate().skip(1) {
            let previous = &w.steps[i - 1];
            if step.on_fallback
                && step.route != previous.route
                && let Some(class) = previous.failure
            {
                let rescued = if w.steps[i..].iter().any(|s| s.deliverable) { workflows } else { 0 };
                match classes.iter_mut().find(|(c, _)| *c == class) {
                    Some((_, n)) => *n += rescued,
                    None => classes.push((class, rescued)),
                }
            }
        }
    }
    classes.sort_by_key(|(class, n)| (*n, <&'static str>::from(*class)));
    classes
}
