//! What the simulated callers did, in their own terms (an SDK call and its
//! retries, the application's tries, the fallback route), and what a caller
//! with a shorter policy would have kept of it: the ground truth the audit's
//! and the replay's tests compare with. Nothing here reads the store or the
//! replay's code; each limit is stated as the caller's loop would obey it.

use std::collections::{BTreeMap, HashMap};

use attempt_core::finding::FindingKind;
use attempt_core::pricing::{PriceKey, PriceTable, Usage, price_tier, prompt_over};

/// What the simulated callers did wrong, counted as they did it, in the
/// recovery audit's terms (docs/record-format.md, "The audit", built-in
/// policy): by finding, (workflows, attempts); and each workflow's attempts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Truth {
    pub findings: BTreeMap<FindingKind, (u64, u64)>,
    /// Each workflow's attempts as the simulated callers made them: what
    /// the replay tests' ground truth reads.
    pub workflows: Vec<SimWorkflow>,
}

/// One simulated workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct SimWorkflow {
    pub id: String,
    pub attempts: Vec<SimAttempt>,
}

/// One simulated attempt, in the callers' own terms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimAttempt {
    /// 0 unless the SDK made it: then its retry's number in that SDK call (1, 2, ...).
    pub sdk_retry: u32,
    /// 0 unless the application retried: then its retry's number (1, 2, ...).
    pub app_retry: u32,
    pub fallback: bool,
    /// The provider's error code; `None` when it succeeded.
    pub error_code: Option<&'static str>,
    /// Start, epoch milliseconds.
    pub start_ms: i64,
    pub duration_ms: f64,
    /// Who served it, on which tier, and the tokens it was billed for.
    pub served: (&'static str, &'static str),
    pub batch: Option<bool>,
    pub service_tier: Option<&'static str>,
    pub input_tokens: i64,
    pub cached_input_tokens: i64,
    pub cache_write_input_tokens: i64,
    pub cache_write_1h_input_tokens: i64,
    pub output_tokens: i64,
}

/// A shorter caller policy, in the simulated callers' terms. Each `None`,
/// `false` or empty list: as simulated.
#[derive(Debug, Clone, Default)]
pub struct Shorter {
    /// SDK retries per SDK call.
    pub sdk_retries: Option<u32>,
    /// Application retries per route.
    pub app_retries: Option<u32>,
    /// Attempts in all.
    pub max_attempts: Option<usize>,
    /// Attempts on each route.
    pub route_attempts: Option<usize>,
    /// Error codes after which the same route is not called again.
    pub no_retry_after: Vec<&'static str>,
    pub no_fallback: bool,
    /// Error codes after which the caller may fall back; `None`: any.
    pub fallback_after: Option<Vec<&'static str>>,
    /// No attempt starts later than this after the first one started.
    pub max_elapsed_ms: Option<f64>,
    /// No attempt once the failed ones cost more than this (pico-USD).
    pub max_failed_cost_pusd: Option<i128>,
    /// Retries a minute may start: (share of the minute's first attempts,
    /// at least this many).
    pub retry_budget: Option<(f64, u64)>,
}

/// What a caller does with the attempt it is about to make.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    First,
    /// Another call inside the same SDK call.
    SdkRetry,
    /// A new application try of the same route.
    AppRetry,
    /// The first call on the fallback route.
    Fallback,
}

/// Where one workflow's shorter caller stands.
#[derive(Default)]
struct Caller {
    kept: usize,
    ended: bool,
    delivered: bool,
    /// Giving up: the rest of this SDK call (`Some(None)`), or everything
    /// on this route (`Some(Some(fallback))`).
    skipping: Option<Option<bool>>,
    last_code: Option<&'static str>,
    /// When the caller's last kept attempt ended, in its own time (ms after
    /// its first attempt's start).
    last_end_ms: f64,
    /// Recorded start minus the caller's own start, since its last skip.
    shift_ms: f64,
    failed_cost_pusd: i128,
    route_kept: [usize; 2],
}

impl Truth {
    /// What a caller with `policy` would have kept of each workflow's
    /// attempts, by the simulator's own bookkeeping: the attempts it would
    /// not have made are dropped, and a workflow whose success was dropped
    /// ends failed. When a limit ends an SDK call or a route early, the
    /// caller's next try starts as long after the last attempt it kept as
    /// the recorded one did after its predecessor, with its recorded
    /// result. Returns (workflows delivered, attempts kept).
    pub fn shorter(&self, policy: &Shorter, prices: &PriceTable) -> (u64, u64) {
        let mut callers: Vec<Caller> = self.workflows.iter().map(|_| Caller::default()).collect();
        // Every attempt in the order the callers started them (the retry
        // budget's minutes fill in that order), ties by workflow id.
        let mut order: Vec<(i64, &str, usize, usize)> = Vec::new();
        let mut first_by_minute: HashMap<i64, u64> = HashMap::new();
        for (w, workflow) in self.workflows.iter().enumerate() {
            for (i, a) in workflow.attempts.iter().enumerate() {
                order.push((a.start_ms, &workflow.id, w, i));
            }
            if let Some(first) = workflow.attempts.first() {
                *first_by_minute.entry(first.start_ms.div_euclid(60_000)).or_default() += 1;
            }
        }
        order.sort();
        let mut retries_by_minute: HashMap<i64, u64> = HashMap::new();
        for (_, _, w, i) in order {
            let attempts = &self.workflows[w].attempts;
            let a = &attempts[i];
            let c = &mut callers[w];
            if c.ended || c.delivered {
                continue;
            }
            let kind = match (i, a.sdk_retry, a.app_retry) {
                (0, _, _) => Kind::First,
                (_, 1.., _) => Kind::SdkRetry,
                (_, 0, 1..) => Kind::AppRetry,
                _ => Kind::Fallback,
            };
            let resumed = match c.skipping {
                Some(None) if kind == Kind::SdkRetry => continue,
                Some(Some(route)) if a.fallback == route => continue,
                skipping => skipping.is_some(),
            };
            let recorded_ms = (a.start_ms - attempts[0].start_ms) as f64;
            let start_ms = if kind == Kind::First {
                0.0
            } else if resumed {
                let before = &attempts[i - 1];
                let recorded_gap = (a.start_ms - before.start_ms) as f64 - before.duration_ms;
                c.last_end_ms + recorded_gap.max(0.0)
            } else {
                recorded_ms - c.shift_ms
            };
            if kind != Kind::First {
                if policy.max_attempts.is_some_and(|max| c.kept >= max)
                    || policy.max_elapsed_ms.is_some_and(|max| start_ms > max)
                    || policy.max_failed_cost_pusd.is_some_and(|max| c.failed_cost_pusd > max)
                {
                    c.ended = true;
                    continue;
                }
                let same_route_again = kind != Kind::Fallback;
                let refused = match kind {
                    Kind::SdkRetry => policy.sdk_retries.is_some_and(|max| a.sdk_retry > max),
                    Kind::AppRetry => policy.app_retries.is_some_and(|max| a.app_retry > max),
                    _ => {
                        policy.no_fallback
                            || policy
                                .fallback_after
                                .as_ref()
                                .is_some_and(|codes| !c.last_code.is_some_and(|code| codes.contains(&code)))
                    }
                } || (same_route_again
                    && c.last_code.is_some_and(|code| policy.no_retry_after.contains(&code)))
                    || policy.route_attempts.is_some_and(|max| c.route_kept[usize::from(a.fallback)] >= max)
                    || policy.retry_budget.is_some_and(|(share, floor)| {
                        let minute = a.start_ms.div_euclid(60_000);
                        let first = first_by_minute.get(&minute).copied().unwrap_or(0);
                        let admitted = ((share * first as f64).floor() as u64).max(floor);
                        retries_by_minute.get(&minute).copied().unwrap_or(0) >= admitted
                    });
                if refused {
                    // A refused SDK retry ends the SDK call (an application
                    // try may follow); a refused application try ends the
                    // route; a refused fallback ends the workflow (there is
                    // no third route).
                    match kind {
                        Kind::SdkRetry => c.skipping = Some(None),
                        Kind::Fallback => c.ended = true,
                        _ => c.skipping = Some(Some(a.fallback)),
                    }
                    continue;
                }
                if policy.retry_budget.is_some() {
                    *retries_by_minute.entry(a.start_ms.div_euclid(60_000)).or_default() += 1;
                }
            }
            if resumed {
                c.shift_ms = recorded_ms - start_ms;
            }
            c.skipping = None;
            c.kept += 1;
            c.route_kept[usize::from(a.fallback)] += 1;
            c.last_end_ms = start_ms + a.duration_ms;
            c.last_code = a.error_code;
            match a.error_code {
                None => c.delivered = true,
                Some(_) => c.failed_cost_pusd += cost_pusd(a, prices),
            }
        }
        callers.iter().fold((0, 0), |(delivered, attempts), c| {
            (delivered + u64::from(c.delivered), attempts + c.kept as u64)
        })
    }
}

/// What the attempt's tokens cost at the served model's price (0 where the
/// table has none).
fn cost_pusd(a: &SimAttempt, prices: &PriceTable) -> i128 {
    let day = chrono::DateTime::from_timestamp_millis(a.start_ms).unwrap_or_default().date_naive();
    let tier = price_tier(a.batch, a.service_tier);
    let key = PriceKey {
        provider: a.served.0,
        model: a.served.1,
        day,
        tier: &tier,
        prompt_over: prompt_over(a.input_tokens),
        billing_account: None,
    };
    let usage = Usage {
        input: a.input_tokens,
        cached_input: a.cached_input_tokens,
        cache_write: a.cache_write_input_tokens,
        cache_write_1h: a.cache_write_1h_input_tokens,
        output: a.output_tokens,
        ..Usage::default()
    };
    prices.cost(&key, &usage).unwrap_or(0)
}
