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

use crate::model::{ErrorClass, PicoUsd};

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read policy file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("policy file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("policy file {path}: {context}: {message}")]
    Invalid { path: String, context: String, message: String },
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

impl PolicySet {
    pub fn load(path: &Path) -> Result<PolicySet, PolicyError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| PolicyError::Read { path: path.display().to_string(), source })?;
        PolicySet::parse(&text, &path.display().to_string())
    }

    /// `origin` names the text in errors (a path).
    pub fn parse(text: &str, origin: &str) -> Result<PolicySet, PolicyError> {
        let raw: RawFile = toml::from_str(text)
            .map_err(|err| PolicyError::Parse { path: origin.to_string(), message: err.to_string() })?;
        let invalid = |context: &str, message: String| PolicyError::Invalid {
            path: origin.to_string(),
            context: context.to_string(),
            message,
        };
        let default = raw.default.unwrap_or_default().resolve(&Policy::default(), "[default]", &invalid)?;
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
            let policy = w.rules.resolve(&default, &context, &invalid)?;
            workflows.push((w.name, policy));
        }
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
    fail_closed_on: Option<Vec<String>>,
    fail_closed_on_commit: Option<Vec<String>>,
    max_total_attempts: Option<u64>,
    max_elapsed_ms: Option<f64>,
    max_extra_cost_usd: Option<f64>,
    approved_fallbacks: Option<Vec<String>>,
    queue_allowed: Option<bool>,
    retry_budget: Option<f64>,
    retry_budget_floor: Option<u64>,
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
    /// Fields given here, the rest from `base`.
    fn resolve(
        self,
        base: &Policy,
        context: &str,
        invalid: &impl Fn(&str, String) -> PolicyError,
    ) -> Result<Policy, PolicyError> {
        let classes = |values: Option<Vec<String>>, field: &str, base: &Vec<ErrorClass>| match values {
            Some(v) => names::<ErrorClass>(&v, field, ErrorClass::VARIANTS, context, invalid),
            None => Ok(base.clone()),
        };
        if self.max_total_attempts == Some(0) {
            return Err(invalid(context, "`max_total_attempts` must be 1 or more".into()));
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
            None => base.max_extra_cost_pusd,
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
        Ok(Policy {
            retryable: classes(self.retryable, "retryable", &base.retryable)?,
            fail_closed_on: classes(self.fail_closed_on, "fail_closed_on", &base.fail_closed_on)?,
            fail_closed_on_commit: match self.fail_closed_on_commit {
                Some(v) => names::<CommitMarker>(
                    &v,
                    "fail_closed_on_commit",
                    CommitMarker::VARIANTS,
                    context,
                    invalid,
                )?,
                None => base.fail_closed_on_commit.clone(),
            },
            max_total_attempts: self.max_total_attempts.or(base.max_total_attempts),
            max_elapsed_ms: self.max_elapsed_ms.or(base.max_elapsed_ms),
            max_extra_cost_pusd,
            approved_fallbacks: self
                .approved_fallbacks
                .map(|routes| routes.into_iter().map(|r| r.trim().to_lowercase()).collect())
                .or_else(|| base.approved_fallbacks.clone()),
            queue_allowed: self.queue_allowed.unwrap_or(base.queue_allowed),
            retry_budget: self.retry_budget.unwrap_or(base.retry_budget),
            retry_budget_floor: self.retry_budget_floor.unwrap_or(base.retry_budget_floor),
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
        assert!(err("[[workflow]]\nname = \"a\"\nmax_retries = 3").contains("unknown field `max_retries`"));
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
