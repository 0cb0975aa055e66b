//! The recovery audit's findings: where retries and fallbacks broke a rule
//! of the recovery policy (`queries/audit.sql` names each row by one). One
//! enum, so the SQL's names, the report, the alert rules' `finding` and the
//! simulator cannot drift apart.

use serde::Serialize;

/// Every finding, in report order.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
    strum::VariantNames,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum FindingKind {
    NonretryableRetried,
    FallbackAfterPolicy,
    FailClosedIgnored,
    ReplayAfterCommit,
    RetryAfterIgnored,
    TimeoutOutputRetried,
    StackedRetries,
    OverAttemptBudget,
    OverTimeBudget,
    OverCostBudget,
    UnapprovedFallback,
    QueuedForbidden,
    OverRetryBudget,
    OverLayerRetries,
    OverRouteAttempts,
    FallbackForbidden,
    PinnedFallback,
    CostlierFallback,
}

impl FindingKind {
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Why the finding matters, as the audit prints it.
    pub fn why(self) -> &'static str {
        match self {
            FindingKind::NonretryableRetried => {
                "a failure of a class the policy does not retry (by default request, auth, policy, quota) retried on \
         the same route: the same answer, billed again"
            }
            FindingKind::FallbackAfterPolicy => "a safety refusal routed around to another model",
            FindingKind::FailClosedIgnored => {
                "another attempt (retry or fallback) after a failure of a class the policy fails closed on"
            }
            FindingKind::ReplayAfterCommit => {
                "an attempt after a side effect committed (or may have) or output was shown: done twice, or two answers spliced"
            }
            FindingKind::RetryAfterIgnored => {
                "the next attempt to a provider started more than 1 s before the retry-after it asked for had passed"
            }
            FindingKind::TimeoutOutputRetried => {
                "a timeout that had already produced output, then retried: the output paid for twice"
            }
            FindingKind::StackedRetries => {
                "two or more layers (SDK, gateway, app, queue) each retrying the same route: their limits multiply"
            }
            FindingKind::OverAttemptBudget => "attempts beyond the policy's max_total_attempts",
            FindingKind::OverTimeBudget => {
                "attempts started after the policy's max_elapsed_ms from the first"
            }
            FindingKind::OverCostBudget => {
                "attempts sent once the cost of the undelivered ones had passed the policy's max_extra_cost_usd"
            }
            FindingKind::UnapprovedFallback => {
                "attempts on a fallback route the policy does not approve for the workflow"
            }
            FindingKind::QueuedForbidden => {
                "work queued or redelivered by a queue where the policy forbids queueing"
            }
            FindingKind::OverLayerRetries => {
                "retries by one layer (SDK, gateway, app, queue) beyond the policy's max_retries for it, per call of \
         the layers outside it"
            }
            FindingKind::OverRouteAttempts => "attempts on one route beyond the policy's max_route_attempts",
            FindingKind::FallbackForbidden => {
                "attempts on a fallback route where the policy has fallback = false, or moves onto one after a class \
         its fallback_on does not list"
            }
            FindingKind::PinnedFallback => {
                "attempts on a fallback route by a workflow the policy pins to its model (pinned = true): it \
         silently answered with another model"
            }
            FindingKind::CostlierFallback => {
                "attempts on a fallback route whose model charges more per input or output token than the \
         primary's, where the policy has no_costlier_fallback = true"
            }
            FindingKind::OverRetryBudget => {
                "minutes in which a workflow's retries passed its retry budget (10 % of its first attempts, and more \
         than 10, by default): retries that feed the overload they react to"
            }
        }
    }

    /// `over_retry_budget` counts minutes; every other finding counts workflows.
    pub fn counts_minutes(self) -> bool {
        self == FindingKind::OverRetryBudget
    }
}

impl std::fmt::Display for FindingKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
