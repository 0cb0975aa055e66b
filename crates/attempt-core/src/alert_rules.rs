//! The alert rule file (TOML): evaluation timing, receivers and rules. Read
//! strictly: an unknown key, a misspelt kind or a threshold out of range is
//! an error naming the rule and the field, never a rule silently ignored.
//! `examples/alerts.toml` documents every key.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use strum::VariantNames;

use crate::finding::FindingKind;

#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    #[error("cannot read rule file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("rule file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("rule file {path}: {context}: {message}")]
    Invalid { path: String, context: String, message: String },
}

/// What a rule watches. Each kind's value is defined over the workflows whose
/// first attempt started inside the rule's window (as `report --since
/// --until`), so an alert's number is the report's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, strum::IntoStaticStr, strum::EnumIter)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum RuleKind {
    /// Workflows that sent an attempt to a fallback route; fires above
    /// `threshold` (default 0: any activation).
    FallbackActivation,
    /// Share of the window's workflows that fell back; fires above `threshold`.
    FallbackRate,
    /// Per primary route: primary successes / terminal workflows; fires
    /// below `threshold` (the route's objective), whatever final success is.
    PrimarySuccess,
    /// Retries / first attempts; fires above `threshold` (default 0.10).
    RetryRatio,
    /// Share of terminal workflows that failed closed; fires above `threshold`.
    FailClosedRate,
    /// Share of terminal workflows that degraded; fires above `threshold`.
    DegradedRate,
    /// Known cost of wasted attempts, USD per hour; fires above `threshold`.
    WastedCostPerHour,
    /// Wasted input + output tokens per hour; fires above `threshold`.
    WastedTokensPerHour,
    /// Failed attempts of class `quota` (insufficient_quota: a human must
    /// act); fires above `threshold` (default 0: any).
    QuotaExhausted,
    /// Per recovery-audit finding (`finding` names one; default: each):
    /// workflows with it; fires above `threshold` (default 0: any).
    PolicyViolation,
    /// Per served provider, model and error class (`provider` / `model`
    /// narrow it to a served route): failed attempts of the class / every
    /// attempt the route served; fires above `threshold`, sustained for
    /// `for`. `min_workflows` counts the route's attempts here.
    ErrorRate,
    /// Per served provider, model, billing account and limit kind
    /// (`provider` / `model` narrow it to a served route): the lowest
    /// remaining / limit a response stated in the window; fires below
    /// `threshold` (default 0.10), before the 429s begin.
    RatelimitHeadroom,
    /// Per route and caller (`provider` / `model` narrow it to a route):
    /// how long, in seconds, the route's breaker has been open at the
    /// evaluation; fires above `threshold` (default 0: while open), so with
    /// `for` it fires once a breaker stayed open longer than `for`.
    CircuitOpen,
    /// Per billing provider (`provider` names one; default: each): the
    /// ledger's drift from the imported bill over the window's settled,
    /// compared day cells (`reconcile`), |drift| in percent of the billed
    /// cost; fires above `threshold` (percent).
    CostDrift,
}

impl RuleKind {
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The threshold used when the rule gives none; `None`: required.
    fn default_threshold(self) -> Option<f64> {
        match self {
            RuleKind::FallbackActivation
            | RuleKind::QuotaExhausted
            | RuleKind::PolicyViolation
            | RuleKind::CircuitOpen => Some(0.0),
            RuleKind::RetryRatio | RuleKind::RatelimitHeadroom => Some(0.10),
            _ => None,
        }
    }

    /// Whether the value is a share in [0, 1].
    fn is_rate(self) -> bool {
        matches!(
            self,
            RuleKind::FallbackRate
                | RuleKind::PrimarySuccess
                | RuleKind::FailClosedRate
                | RuleKind::DegradedRate
                | RuleKind::RatelimitHeadroom
                | RuleKind::ErrorRate
        )
    }

    /// True when a value under the threshold breaches (an objective).
    pub fn fires_below(self) -> bool {
        matches!(self, RuleKind::PrimarySuccess | RuleKind::RatelimitHeadroom)
    }

    /// Whether `provider` and `model` narrow the rule to routes.
    fn takes_route(self) -> bool {
        matches!(
            self,
            RuleKind::PrimarySuccess
                | RuleKind::RatelimitHeadroom
                | RuleKind::ErrorRate
                | RuleKind::CircuitOpen
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ReceiverKind {
    /// POST of the alert as JSON (this crate's own shape, documented).
    Webhook,
    /// Slack incoming webhook (or anything that takes `{"text": ...}`).
    Slack,
    /// Alertmanager's `POST /api/v2/alerts`: the URL is the full endpoint.
    Alertmanager,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Receiver {
    pub name: String,
    pub kind: ReceiverKind,
    pub url: String,
    /// Per-request timeout.
    pub timeout: Duration,
    /// First retry delay; doubles per failure up to `max_backoff`.
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// Tries per notification before it is given up (and counted failed).
    pub max_tries: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub name: String,
    pub kind: RuleKind,
    pub threshold: f64,
    pub window: Duration,
    /// How long the condition must hold before the alert fires.
    pub for_: Duration,
    /// Only workflows with this name (`workflow` field).
    pub workflow: Option<String>,
    /// `primary_success` only: which primary routes (default: each).
    pub provider: Option<String>,
    pub model: Option<String>,
    /// `policy_violation` only: one finding (default: each).
    pub finding: Option<FindingKind>,
    /// Rate kinds: fewer terminal workflows than this in the window is no
    /// data (not a breach), so one failure at 3 a.m. is not a 100 % rate.
    pub min_workflows: u64,
    pub severity: String,
    /// Receiver names; empty means every receiver.
    pub receivers: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RuleSet {
    /// How often the service evaluates every rule.
    pub interval: Duration,
    /// A still-firing alert is notified again this often.
    pub repeat_interval: Duration,
    pub receivers: Vec<Receiver>,
    pub rules: Vec<Rule>,
}

impl RuleSet {
    pub fn load(path: &Path) -> Result<RuleSet, RulesError> {
        let text = crate::files::read_config(path)
            .map_err(|source| RulesError::Read { path: path.display().to_string(), source })?;
        RuleSet::parse(&text, &path.display().to_string())
    }

    /// `origin` names the text in errors (a path).
    pub fn parse(text: &str, origin: &str) -> Result<RuleSet, RulesError> {
        let raw: RawFile = toml::from_str(text)
            .map_err(|err| RulesError::Parse { path: origin.to_string(), message: err.to_string() })?;
        let invalid = |context: String, message: String| RulesError::Invalid {
            path: origin.to_string(),
            context,
            message,
        };
        let duration = |context: &str, field: &str, text: Option<&str>, default: Duration| match text {
            None => Ok(default),
            Some(t) => humantime::parse_duration(t).map_err(|e| {
                invalid(context.to_string(), format!("`{field}` = {t:?} is not a duration ({e})"))
            }),
        };

        let interval = duration(
            "[evaluation]",
            "interval",
            raw.evaluation.interval.as_deref(),
            Duration::from_secs(15),
        )?;
        let repeat_interval = duration(
            "[evaluation]",
            "repeat_interval",
            raw.evaluation.repeat_interval.as_deref(),
            Duration::from_secs(4 * 3600),
        )?;
        if interval.is_zero() {
            return Err(invalid("[evaluation]".into(), "`interval` must be more than 0".into()));
        }

        let mut receivers = Vec::new();
        let mut names = HashSet::new();
        for r in raw.receivers {
            let context = format!("receiver {:?}", r.name);
            if !names.insert(r.name.clone()) {
                return Err(invalid(context, "another receiver has this name".into()));
            }
            if !(r.url.starts_with("http://") || r.url.starts_with("https://")) {
                return Err(invalid(context, format!("`url` = {:?} is not an http(s) URL", r.url)));
            }
            receivers.push(Receiver {
                timeout: duration(&context, "timeout", r.timeout.as_deref(), Duration::from_secs(10))?,
                backoff: duration(&context, "backoff", r.backoff.as_deref(), Duration::from_secs(1))?,
                max_backoff: duration(
                    &context,
                    "max_backoff",
                    r.max_backoff.as_deref(),
                    Duration::from_secs(300),
                )?,
                max_tries: r.max_tries.unwrap_or(10).max(1),
                name: r.name,
                kind: r.kind,
                url: r.url,
            });
        }

        let mut rules = Vec::new();
        let mut rule_names = HashSet::new();
        for r in raw.rules {
            let context = format!("rule {:?}", r.name);
            if !rule_names.insert(r.name.clone()) {
                return Err(invalid(context, "another rule has this name".into()));
            }
            let threshold = match r.threshold.or(r.kind.default_threshold()) {
                Some(t) => t,
                None => {
                    return Err(invalid(context, format!("kind {} needs a `threshold`", r.kind.name())));
                }
            };
            if !threshold.is_finite() || threshold < 0.0 || (r.kind.is_rate() && threshold > 1.0) {
                let range = if r.kind.is_rate() { "a share between 0 and 1" } else { "0 or more" };
                return Err(invalid(context, format!("`threshold` = {threshold} must be {range}")));
            }
            if !r.kind.takes_route() && r.model.is_some() {
                return Err(invalid(
                    context,
                    "`model` applies to kinds primary_success, ratelimit_headroom and error_rate only".into(),
                ));
            }
            if !(r.kind.takes_route() || r.kind == RuleKind::CostDrift) && r.provider.is_some() {
                return Err(invalid(
                    context,
                    "`provider` applies to kinds primary_success, ratelimit_headroom, error_rate and cost_drift only"
                        .into(),
                ));
            }
            if r.kind == RuleKind::CostDrift && r.workflow.is_some() {
                return Err(invalid(
                    context,
                    "`workflow` does not apply to kind cost_drift: the bill has no workflows".into(),
                ));
            }
            if r.finding.is_some() && r.kind != RuleKind::PolicyViolation {
                return Err(invalid(context, "`finding` applies to kind policy_violation only".into()));
            }
            let finding = match r.finding.as_deref().map(str::parse::<FindingKind>) {
                None => None,
                Some(Ok(finding)) => Some(finding),
                Some(Err(_)) => {
                    return Err(invalid(
                        context,
                        format!(
                            "`finding` = {:?} is not one of {}",
                            r.finding.unwrap_or_default(),
                            FindingKind::VARIANTS.join(", ")
                        ),
                    ));
                }
            };
            if let Some(unknown) = r.receivers.iter().flatten().find(|n| !names.contains(*n)) {
                return Err(invalid(context, format!("no receiver is named {unknown:?}")));
            }
            let window = duration(&context, "window", r.window.as_deref(), Duration::from_secs(300))?;
            if window.as_secs_f64() < 1.0 {
                return Err(invalid(context, "`window` must be at least 1s".into()));
            }
            rules.push(Rule {
                for_: duration(&context, "for", r.for_.as_deref(), Duration::ZERO)?,
                window,
                threshold,
                kind: r.kind,
                workflow: r.workflow,
                provider: r.provider.map(|p| p.to_lowercase()),
                model: r.model,
                finding,
                min_workflows: r.min_workflows.unwrap_or(1).max(1),
                severity: r.severity.unwrap_or_else(|| "warning".into()),
                receivers: r.receivers.unwrap_or_default(),
                name: r.name,
            });
        }
        Ok(RuleSet { interval, repeat_interval, receivers, rules })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    evaluation: RawEvaluation,
    #[serde(default, rename = "receiver")]
    receivers: Vec<RawReceiver>,
    #[serde(default, rename = "rule")]
    rules: Vec<RawRule>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvaluation {
    interval: Option<String>,
    repeat_interval: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReceiver {
    name: String,
    kind: ReceiverKind,
    url: String,
    timeout: Option<String>,
    backoff: Option<String>,
    max_backoff: Option<String>,
    max_tries: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    name: String,
    kind: RuleKind,
    threshold: Option<f64>,
    window: Option<String>,
    #[serde(rename = "for")]
    for_: Option<String>,
    workflow: Option<String>,
    provider: Option<String>,
    model: Option<String>,
    finding: Option<String>,
    min_workflows: Option<u64>,
    severity: Option<String>,
    receivers: Option<Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        RuleSet::parse(text, "rules.toml").unwrap_err().to_string()
    }

    #[test]
    fn the_shipped_example_parses_and_covers_every_kind() {
        let text = include_str!("../../../examples/alerts.toml");
        let set = RuleSet::parse(text, "examples/alerts.toml").unwrap();
        for kind in <RuleKind as strum::IntoEnumIterator>::iter() {
            assert!(set.rules.iter().any(|r| r.kind == kind), "no example rule of kind {}", kind.name());
        }
        assert_eq!(set.receivers.len(), 3);
    }

    #[test]
    fn defaults_apply_where_a_kind_has_one() {
        let set = RuleSet::parse("[[rule]]\nname = \"fb\"\nkind = \"fallback_activation\"\n", "x").unwrap();
        let rule = &set.rules[0];
        assert_eq!((rule.threshold, rule.window, rule.for_), (0.0, Duration::from_secs(300), Duration::ZERO));
        assert_eq!(set.interval, Duration::from_secs(15));
    }

    #[test]
    fn mistakes_name_the_rule_and_field() {
        let no_threshold = err("[[rule]]\nname = \"p\"\nkind = \"primary_success\"\n");
        assert!(no_threshold.contains("rule \"p\"") && no_threshold.contains("threshold"), "{no_threshold}");
        let rate = err("[[rule]]\nname = \"p\"\nkind = \"fail_closed_rate\"\nthreshold = 5\n");
        assert!(rate.contains("between 0 and 1"), "{rate}");
        let kind = err("[[rule]]\nname = \"p\"\nkind = \"fallback\"\n");
        assert!(kind.contains("fallback_activation") && kind.contains("line"), "{kind}");
        let typo = err("[[rule]]\nname = \"p\"\nkind = \"retry_ratio\"\nwindwo = \"5m\"\n");
        assert!(typo.contains("windwo"), "{typo}");
        let window = err("[[rule]]\nname = \"p\"\nkind = \"retry_ratio\"\nwindow = \"five\"\n");
        assert!(window.contains("`window`"), "{window}");
        let receiver = err("[[rule]]\nname = \"p\"\nkind = \"retry_ratio\"\nreceivers = [\"pager\"]\n");
        assert!(receiver.contains("pager"), "{receiver}");
        let route = err("[[rule]]\nname = \"p\"\nkind = \"retry_ratio\"\nprovider = \"openai\"\n");
        assert!(
            route.contains(
                "`provider` applies to kinds primary_success, ratelimit_headroom, error_rate and cost_drift only"
            ),
            "{route}"
        );
        let model = err("[[rule]]\nname = \"p\"\nkind = \"cost_drift\"\nthreshold = 5\nmodel = \"gpt-4o\"\n");
        assert!(
            model
                .contains("`model` applies to kinds primary_success, ratelimit_headroom and error_rate only"),
            "{model}"
        );
        let drift = RuleSet::parse(
            "[[rule]]\nname = \"d\"\nkind = \"cost_drift\"\nprovider = \"OpenAI\"\nthreshold = 5\nwindow = \"7d\"\n",
            "rules.toml",
        )
        .unwrap();
        assert_eq!(
            (drift.rules[0].kind, drift.rules[0].provider.as_deref()),
            (RuleKind::CostDrift, Some("openai"))
        );
        let bare = err("[[rule]]\nname = \"d\"\nkind = \"cost_drift\"\n");
        assert!(bare.contains("kind cost_drift needs a `threshold`"), "{bare}");
    }
}
