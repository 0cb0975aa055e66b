//! The recovery policy file (TOML): what each workflow's retry and fallback
//! code may do, which `attempt-ledger audit` checks stored traffic against.
//! Read strictly, like the alert rules: an unknown key, class or commit
//! state is an error naming the section and the field. `examples/policy.toml`
//! documents every key.

use std::collections::HashSet;
use std::path::Path;
use std::str::FromStr;

use serde::Deserialize;
use strum::VariantNames;

use crate::model::{ErrorClass, Layer, PicoUsd};

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read policy file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("policy file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("policy file {path}: {context}: {message}")]
    Invalid { path: String, context: String, message: String },
    #[error("--set {assignment:?}: {message}")]
    Assignment { assignment: String, message: String },
}

/// What may have been done before an attempt that makes sending another
/// one a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::EnumString, strum::IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum CommitMarker {
    /// `commit_state: committed`: the side effect happened.
    Committed,
    /// `commit_state: unknown`: it may have.
    Unknown,
    /// `visible_output: true`: the user saw part of an answer.
    VisibleOutput,
}

/// One workflow's rules (or the default's), every field resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Classes that may be retried on the same route.
    pub retryable: Vec<ErrorClass>,
    /// Classes after which nothing more may be sent (retry or fallback).
    pub fail_closed_on: Vec<ErrorClass>,
    /// What before an attempt makes it a replay.
    pub fail_closed_on_commit: Vec<CommitMarker>,
    pub max_total_attempts: Option<u64>,
    pub max_elapsed_ms: Option<f64>,
    /// Cost of the attempts not delivered, at most.
    pub max_extra_cost_pusd: Option<i128>,
    /// Route keys (a route group, or provider/model) a fallback may use;
    /// `None`: any.
    pub approved_fallbacks: Option<Vec<String>>,
    pub queue_allowed: bool,
    /// Retries per first attempt in any one minute of this workflow's
    /// traffic (gRPC's retry throttling and Envoy's retry budget bound the
    /// same ratio).
    pub retry_budget: f64,
    /// Retries any minute may have whatever the ratio, so that a quiet
    /// minute with one retry is not an incident (Envoy's
    /// `min_retry_concurrency` plays this part).
    pub retry_budget_floor: u64,
    /// By layer (`Layer as usize`): retries of the same route per call of
    /// the layers outside it.
    pub max_retries: [Option<u64>; 4],
    pub max_route_attempts: Option<u64>,
    /// `false`: no attempt on a fallback route.
    pub fallback: bool,
    /// Classes after which a workflow may move to a fallback route; `None`: any.
    pub fallback_on: Option<Vec<ErrorClass>>,
    /// The workflow must stay on its model (a pinned cron job, an
    /// evaluation): any attempt on a fallback route is `pinned_fallback`.
    pub pinned: bool,
    /// A fallback may not cost more: an attempt on a fallback route whose
    /// served model's input or output price per token is above the
    /// primary's is `costlier_fallback`.
    pub no_costlier_fallback: bool,
}

/// The built-in retry budget: the report's default, gRPC's 10 %.
pub const DEFAULT_RETRY_BUDGET: f64 = 0.10;
/// The built-in floor of the retry budget.
pub const DEFAULT_RETRY_BUDGET_FLOOR: u64 = 10;

impl Default for Policy {
    /// What the audit checks without a policy file: the classes that must
    /// not be retried as is, no replay after any commit marker, no limits.
    fn default() -> Policy {
        Policy {
            retryable: [
                ErrorClass::Transient,
                ErrorClass::RateLimit,
                ErrorClass::Timeout,
                ErrorClass::StreamInterrupted,
                ErrorClass::Truncated,
                ErrorClass::InvalidOutput,
                ErrorClass::Unknown,
            ]
            .to_vec(),
            fail_closed_on: Vec::new(),
            fail_closed_on_commit: [
                CommitMarker::Committed,
                CommitMarker::Unknown,
                CommitMarker::VisibleOutput,
            ]
            .to_vec(),
            max_total_attempts: None,
            max_elapsed_ms: None,
            max_extra_cost_pusd: None,
            approved_fallbacks: None,
            queue_allowed: true,
            retry_budget: DEFAULT_RETRY_BUDGET,
            retry_budget_floor: DEFAULT_RETRY_BUDGET_FLOOR,
            max_retries: [None; 4],
            max_route_attempts: None,
            fallback: true,
            fallback_on: None,
            pinned: false,
            no_costlier_fallback: false,
        }
    }
}

/// The default policy and the workflows that override it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PolicySet {
    pub default: Policy,
    /// By workflow name (the records' `workflow`), in file order.
    pub workflows: Vec<(String, Policy)>,
}

/// Policy values may not hold control characters (the store passes lists
/// joined by one).
pub const LIST_SEPARATOR: char = '\u{1f}';

/// The keys one section of a policy file gave, checked, nothing filled in.
/// A replay (`tune`) applies exactly these; the audit fills the keys a
/// section leaves out from `[default]`, then from the built-in policy.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Limits {
    pub retryable: Option<Vec<ErrorClass>>,
    /// Classes after which no retry of the same route may follow (a
    /// fallback may).
    pub no_retry_on: Option<Vec<ErrorClass>>,
    pub fail_closed_on: Option<Vec<ErrorClass>>,
    pub fail_closed_on_commit: Option<Vec<CommitMarker>>,
    pub max_total_attempts: Option<u64>,
    /// By layer (`Layer as usize`): retries of the same route that layer
    /// may make for one call of the layers outside it.
    pub max_retries: [Option<u64>; 4],
    /// Attempts any one route may get in a workflow.
    pub max_route_attempts: Option<u64>,
    pub max_elapsed_ms: Option<f64>,
    pub max_extra_cost_pusd: Option<i128>,
    /// `false`: no attempt on a fallback route.
    pub fallback: Option<bool>,
    /// A workflow may move to a fallback route only after these classes.
    pub fallback_on: Option<Vec<ErrorClass>>,
    pub approved_fallbacks: Option<Vec<String>>,
    pub queue_allowed: Option<bool>,
    pub retry_budget: Option<f64>,
    pub retry_budget_floor: Option<u64>,
    /// A replay stops where a pinned workflow would have fallen back.
    pub pinned: Option<bool>,
    /// An audit rule only: a replay has no price of each fallback route.
    pub no_costlier_fallback: Option<bool>,
}

impl Limits {
    /// These keys, the rest from `base`.
    pub fn over(&self, base: &Limits) -> Limits {
        let mut max_retries = base.max_retries;
        for (slot, given) in max_retries.iter_mut().zip(self.max_retries) {
            if given.is_some() {
                *slot = given;
            }
        }
        Limits {
            retryable: self.retryable.clone().or_else(|| base.retryable.clone()),
            no_retry_on: self.no_retry_on.clone().or_else(|| base.no_retry_on.clone()),
            fail_closed_on: self.fail_closed_on.clone().or_else(|| base.fail_closed_on.clone()),
            fail_closed_on_commit: self
                .fail_closed_on_commit
                .clone()
                .or_else(|| base.fail_closed_on_commit.clone()),
            max_total_attempts: self.max_total_attempts.or(base.max_total_attempts),
            max_retries,
            max_route_attempts: self.max_route_attempts.or(base.max_route_attempts),
            max_elapsed_ms: self.max_elapsed_ms.or(base.max_elapsed_ms),
            max_extra_cost_pusd: self.max_extra_cost_pusd.or(base.max_extra_cost_pusd),
            fallback: self.fallback.or(base.fallback),
            fallback_on: self.fallback_on.clone().or_else(|| base.fallback_on.clone()),
            approved_fallbacks: self.approved_fallbacks.clone().or_else(|| base.approved_fallbacks.clone()),
            queue_allowed: self.queue_allowed.or(base.queue_allowed),
            retry_budget: self.retry_budget.or(base.retry_budget),
            retry_budget_floor: self.retry_budget_floor.or(base.retry_budget_floor),
            pinned: self.pinned.or(base.pinned),
            no_costlier_fallback: self.no_costlier_fallback.or(base.no_costlier_fallback),
        }
    }

    /// No key given: a replay under these changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    /// The built-in policy with these keys over it (the audit's rules).
    fn resolve(&self, base: &Policy) -> Policy {
        let mut retryable = self.retryable.clone().unwrap_or_else(|| base.retryable.clone());
        if let Some(refused) = &self.no_retry_on {
            retryable.retain(|class| !refused.contains(class));
        }
        Policy {
            retryable,
            fail_closed_on: self.fail_closed_on.clone().unwrap_or_else(|| base.fail_closed_on.clone()),
            fail_closed_on_commit: self
                .fail_closed_on_commit
                .clone()
                .unwrap_or_else(|| base.fail_closed_on_commit.clone()),
            max_total_attempts: self.max_total_attempts.or(base.max_total_attempts),
            max_elapsed_ms: self.max_elapsed_ms.or(base.max_elapsed_ms),
            max_extra_cost_pusd: self.max_extra_cost_pusd.or(base.max_extra_cost_pusd),
            approved_fallbacks: self.approved_fallbacks.clone().or_else(|| base.approved_fallbacks.clone()),
            queue_allowed: self.queue_allowed.unwrap_or(base.queue_allowed),
            retry_budget: self.retry_budget.unwrap_or(base.retry_budget),
            retry_budget_floor: self.retry_budget_floor.unwrap_or(base.retry_budget_floor),
            max_retries: std::array::from_fn(|layer| self.max_retries[layer].or(base.max_retries[layer])),
            max_route_attempts: self.max_route_attempts.or(base.max_route_attempts),
            fallback: self.fallback.unwrap_or(base.fallback),
            fallback_on: self.fallback_on.clone().or_else(|| base.fallback_on.clone()),
            pinned: self.pinned.unwrap_or(base.pinned),
            no_costlier_fallback: self.no_costlier_fallback.unwrap_or(base.no_costlier_fallback),
        }
    }

    /// `tune --set KEY=VALUE` (repeatable): the policy file's keys, a value
    /// as TOML writes it (`3`, `false`, `250.0`); a list as words joined by
    /// commas (`no_retry_on=quota,auth`); a layer's retries as
    /// `max_retries.sdk=2`.
    pub fn from_assignments(assignments: &[String]) -> Result<Limits, PolicyError> {
        const LISTS: [&str; 6] = [
            "retryable",
            "no_retry_on",
            "fail_closed_on",
            "fail_closed_on_commit",
            "fallback_on",
            "approved_fallbacks",
        ];
        let origin = "--set";
        let mut text = String::from("[default]\n");
        let mut keys = HashSet::new();
        for assignment in assignments {
            let Some((key, value)) = assignment.split_once('=') else {
                return Err(PolicyError::Parse {
                    path: origin.into(),
                    message: format!("{assignment:?} is not KEY=VALUE"),
                });
            };
            let (key, value) = (key.trim(), value.trim());
            // A value is one TOML value: a line break or another control
            // character would let it set keys the command line never named.
            if value.chars().any(char::is_control) {
                return Err(PolicyError::Assignment {
                    assignment: assignment.clone(),
                    message: "a value is one line without control characters".into(),
                });
            }
            if !keys.insert(key.to_string()) {
                return Err(PolicyError::Assignment {
                    assignment: assignment.clone(),
                    message: format!("`{key}` is set twice: give each key once"),
                });
            }
            if key == "no_costlier_fallback" {
                return Err(PolicyError::Assignment {
                    assignment: assignment.clone(),
                    message:
                        "no_costlier_fallback is an audit rule: a replay does not know each fallback route's \
                              price, so it cannot say where a workflow would have stopped"
                            .into(),
                });
            }
            if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
                return Err(PolicyError::Parse {
                    path: origin.into(),
                    message: format!("{key:?} is not a key"),
                });
            }
            let value = if LISTS.contains(&key) {
                let words: Vec<String> = value
                    .split(',')
                    .map(str::trim)
                    .filter(|w| !w.is_empty())
                    .map(|w| toml::Value::String(w.to_string()).to_string())
                    .collect();
                format!("[{}]", words.join(", "))
            } else if value.parse::<toml::Value>().is_ok()
                || format!("v = {value}").parse::<toml::Table>().is_ok()
            {
                value.to_string()
            } else {
                toml::Value::String(value.to_string()).to_string()
            };
            let line = format!("{key} = {value}\n");
            // Each assignment alone first, so an error names it.
            LimitSet::parse(&format!("[default]\n{line}"), origin).map_err(|e| PolicyError::Assignment {
                assignment: assignment.clone(),
                message: match e {
                    PolicyError::Invalid { message, .. } | PolicyError::Parse { message, .. } => {
                        message.lines().rfind(|l| !l.trim().is_empty()).unwrap_or_default().to_string()
                    }
                    other => other.to_string(),
                },
            })?;
            text.push_str(&line);
        }
        Ok(LimitSet::parse(&text, origin)?.default)
    }
}

/// Every section of a policy file as given: `[default]`, and each
/// `[[workflow]]` with the default's keys under its own.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LimitSet {
    pub default: Limits,
    /// By workflow name, in file order, the default's keys filled in.
    pub workflows: Vec<(String, Limits)>,
}

impl LimitSet {
    pub fn load(path: &Path) -> Result<LimitSet, PolicyError> {
        let text = crate::files::read_config(path)
            .map_err(|source| PolicyError::Read { path: path.display().to_string(), source })?;
        LimitSet::parse(&text, &path.display().to_string())
    }

    /// `origin` names the text in errors (a path).
    pub fn parse(text: &str, origin: &str) -> Result<LimitSet, PolicyError> {
        let raw: RawFile = toml::from_str(text)
            .map_err(|err| PolicyError::Parse { path: origin.to_string(), message: err.to_string() })?;
        let invalid = |context: &str, message: String| PolicyError::Invalid {
            path: origin.to_string(),
            context: context.to_string(),
            message,
        };
        let default = raw.default.unwrap_or_default().check("[default]", &invalid)?;
        let mut names = HashSet::new();
        let mut workflows = Vec::new();
        for w in raw.workflows {
            let context = format!("workflow {:?}", w.name);
            if w.name.trim().is_empty() || w.name.chars().any(char::is_control) {
                return Err(invalid(
                    &context,
                    "`name` must be a workflow name without control characters".into(),
                ));
            }
            if !names.insert(w.name.clone()) {
                return Err(invalid(&context, "another [[workflow]] has this name".into()));
            }
            let limits = w.rules.check(&context, &invalid)?.over(&default);
            workflows.push((w.name, limits));
        }
        Ok(LimitSet { default, workflows })
    }

    /// The limits of the workflows named `name` (the default's if no
    /// section names it).
    pub fn for_workflow(&self, name: Option<&str>) -> &Limits {
        name.and_then(|name| self.workflows.iter().find(|(n, _)| n == name))
            .map_or(&self.default, |(_, limits)| limits)
    }

    /// `overrides` over every section (`--set` over `--policy`).
    pub fn with_overrides(mut self, overrides: &Limits) -> LimitSet {
        self.default = overrides.over(&self.default);
        for (_, limits) in &mut self.workflows {
            *limits = overrides.over(limits);
        }
        self
    }

    /// No section gives any key.
    pub fn is_empty(&self) -> bool {
        self.sections().all(Limits::is_empty)
    }

    /// Every section's limits, `[default]` first.
    pub fn sections(&self) -> impl Iterator<Item = &Limits> {
        std::iter::once(&self.default).chain(self.workflows.iter().map(|(_, l)| l))
    }
}

/// A policy file as read (or the built-in defaults), with its name for the
/// audit's header.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LoadedPolicy {
    pub file: Option<String>,
    pub set: PolicySet,
}

impl LoadedPolicy {
    pub fn load(path: Option<&Path>) -> Result<LoadedPolicy, PolicyError> {
        match path {
            None => Ok(LoadedPolicy::default()),
            Some(path) => {
                Ok(LoadedPolicy { file: Some(path.display().to_string()), set: PolicySet::load(path)? })
            }
        }
    }
}

impl PolicySet {
    pub fn load(path: &Path) -> Result<PolicySet, PolicyError> {
        let text = crate::files::read_config(path)
            .map_err(|source| PolicyError::Read { path: path.display().to_string(), source })?;
        PolicySet::parse(&text, &path.display().to_string())
    }

    /// `origin` names the text in errors (a path).
    pub fn parse(text: &str, origin: &str) -> Result<PolicySet, PolicyError> {
        let limits = LimitSet::parse(text, origin)?;
        let default = limits.default.resolve(&Policy::default());
        let workflows = limits
            .workflows
            .iter()
            .map(|(name, section)| (name.clone(), section.resolve(&Policy::default())))
            .collect();
        Ok(PolicySet { default, workflows })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    default: Option<RawRules>,
    #[serde(default, rename = "workflow")]
    workflows: Vec<RawWorkflow>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkflow {
    name: String,
    #[serde(flatten)]
    rules: RawRules,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRules {
    retryable: Option<Vec<String>>,
    no_retry_on: Option<Vec<String>>,
    fail_closed_on: Option<Vec<String>>,
    fail_closed_on_commit: Option<Vec<String>>,
    max_total_attempts: Option<u64>,
    max_retries: Option<std::collections::BTreeMap<String, u64>>,
    max_route_attempts: Option<u64>,
    max_elapsed_ms: Option<f64>,
    max_extra_cost_usd: Option<f64>,
    fallback: Option<bool>,
    fallback_on: Option<Vec<String>>,
    approved_fallbacks: Option<Vec<String>>,
    queue_allowed: Option<bool>,
    retry_budget: Option<f64>,
    retry_budget_floor: Option<u64>,
    pinned: Option<bool>,
    no_costlier_fallback: Option<bool>,
}

fn names<T: FromStr>(
    values: &[String],
    field: &str,
    known: &[&str],
    context: &str,
    invalid: &impl Fn(&str, String) -> PolicyError,
) -> Result<Vec<T>, PolicyError> {
    values
        .iter()
        .map(|v| {
            v.parse::<T>()
                .map_err(|_| invalid(context, format!("`{field}`: {v:?} is not one of {}", known.join(", "))))
        })
        .collect()
}

impl RawRules {
    /// The keys given, each checked; none filled in.
    fn check(
        self,
        context: &str,
        invalid: &impl Fn(&str, String) -> PolicyError,
    ) -> Result<Limits, PolicyError> {
        let classes = |values: Option<Vec<String>>, field: &str| {
            values.map(|v| names::<ErrorClass>(&v, field, ErrorClass::VARIANTS, context, invalid)).transpose()
        };
        if self.max_total_attempts == Some(0) {
            return Err(invalid(context, "`max_total_attempts` must be 1 or more".into()));
        }
        if self.max_route_attempts == Some(0) {
            return Err(invalid(context, "`max_route_attempts` must be 1 or more".into()));
        }
        if let Some(ratio) = self.retry_budget.filter(|r| !r.is_finite() || *r < 0.0) {
            return Err(invalid(
                context,
                format!("`retry_budget` = {ratio} must be a fraction of 0 or more"),
            ));
        }
        if let Some(floor) = self.retry_budget_floor.filter(|f| i64::try_from(*f).is_err()) {
            return Err(invalid(context, format!("`retry_budget_floor` = {floor} is too large")));
        }
        if let Some(ms) = self.max_elapsed_ms.filter(|ms| !ms.is_finite() || *ms < 0.0) {
            return Err(invalid(context, format!("`max_elapsed_ms` = {ms} must be 0 or more")));
        }
        let max_extra_cost_pusd = match self.max_extra_cost_usd {
            None => None,
            Some(usd) if usd.is_finite() && (0.0..=1e9).contains(&usd) => {
                Some((usd * PicoUsd::PER_USD).round() as i128)
            }
            Some(usd) => {
                return Err(invalid(
                    context,
                    format!("`max_extra_cost_usd` = {usd} must be between 0 and 1e9"),
                ));
            }
        };
        if let Some(bad) = self
            .approved_fallbacks
            .iter()
            .flatten()
            .find(|r| r.trim().is_empty() || r.chars().any(char::is_control))
        {
            return Err(invalid(
                context,
                format!("`approved_fallbacks`: {bad:?} is not a route (a route group, or provider/model)"),
            ));
        }
        let mut max_retries = [None; 4];
        for (layer, retries) in self.max_retries.into_iter().flatten() {
            let parsed = layer.parse::<Layer>().map_err(|_| {
                invalid(
                    context,
                    format!("`max_retries`: {layer:?} is not one of {}", Layer::VARIANTS.join(", ")),
                )
            })?;
            if i64::try_from(retries).is_err() {
                return Err(invalid(context, format!("`max_retries.{layer}` = {retries} is too large")));
            }
            max_retries[parsed as usize] = Some(retries);
        }
        Ok(Limits {
            retryable: classes(self.retryable, "retryable")?,
            no_retry_on: classes(self.no_retry_on, "no_retry_on")?,
            fail_closed_on: classes(self.fail_closed_on, "fail_closed_on")?,
            fail_closed_on_commit: self
                .fail_closed_on_commit
                .map(|v| {
                    names::<CommitMarker>(
                        &v,
                        "fail_closed_on_commit",
                        CommitMarker::VARIANTS,
                        context,
                        invalid,
                    )
                })
                .transpose()?,
            max_total_attempts: self.max_total_attempts,
            max_retries,
            max_route_attempts: self.max_route_attempts,
            max_elapsed_ms: self.max_elapsed_ms,
            max_extra_cost_pusd,
            fallback: self.fallback,
            fallback_on: classes(self.fallback_on, "fallback_on")?,
            approved_fallbacks: self
                .approved_fallbacks
                .map(|routes| routes.into_iter().map(|r| r.trim().to_lowercase()).collect()),
            queue_allowed: self.queue_allowed,
            retry_budget: self.retry_budget,
            retry_budget_floor: self.retry_budget_floor,
            pinned: self.pinned,
            no_costlier_fallback: self.no_costlier_fallback,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflows_inherit_the_default_and_override_what_they_name() {
        let set = PolicySet::parse(
            r#"
[default]
max_total_attempts = 5
fail_closed_on = ["auth"]

[[workflow]]
name = "summary-interactive"
max_total_attempts = 3
max_extra_cost_usd = 0.02
approved_fallbacks = ["summary-backup", "Anthropic/claude-haiku-4-5"]
queue_allowed = false
"#,
            "p.toml",
        )
        .unwrap();
        assert_eq!(set.default.max_total_attempts, Some(5));
        assert_eq!(set.default.retryable, Policy::default().retryable);
        let (name, w) = &set.workflows[0];
        assert_eq!(name, "summary-interactive");
        assert_eq!(w.max_total_attempts, Some(3));
        assert_eq!(w.fail_closed_on, [ErrorClass::Auth], "inherited");
        assert_eq!(w.max_extra_cost_pusd, Some(20_000_000_000));
        assert_eq!(
            w.approved_fallbacks.as_deref(),
            Some(&["summary-backup".to_string(), "anthropic/claude-haiku-4-5".to_string()][..])
        );
        assert!(!w.queue_allowed);
        assert_eq!(
            (w.retry_budget, w.retry_budget_floor),
            (DEFAULT_RETRY_BUDGET, DEFAULT_RETRY_BUDGET_FLOOR)
        );
        assert_eq!(PolicySet::parse("", "empty").unwrap(), PolicySet::default());
    }

    #[test]
    fn mistakes_name_the_section_and_the_field() {
        let err = |text: &str| PolicySet::parse(text, "p.toml").unwrap_err().to_string();
        assert!(
            err("[default]\nretryable = [\"transient\", \"flaky\"]")
                .contains("[default]: `retryable`: \"flaky\" is not one of")
        );
        assert!(err("[[workflow]]\nname = \"a\"\nmax_tries = 3").contains("unknown field `max_tries`"));
        assert!(
            err("[default]\nmax_retries = { robot = 2 }").contains("[default]: `max_retries`: \"robot\"")
        );
        assert!(
            err("[[workflow]]\nname = \"a\"\n[[workflow]]\nname = \"a\"")
                .contains("another [[workflow]] has this name")
        );
        assert!(err("[default]\nmax_total_attempts = 0").contains("1 or more"));
        assert!(err("[default]\nmax_extra_cost_usd = -1.0").contains("between 0 and 1e9"));
        assert!(err("[default]\nretry_budget = -0.5").contains("`retry_budget` = -0.5 must be a fraction"));
        assert!(err("[default]\nretry_budget = nan").contains("`retry_budget` = NaN"));
        assert!(
            err("[default]\nfail_closed_on_commit = [\"none\"]")
                .contains("`fail_closed_on_commit`: \"none\"")
        );
        assert!(err("[[workflow]]\nname = \"a\\u001fb\"").contains("control characters"));
    }
}
