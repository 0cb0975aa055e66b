//! Synthetic, seeded traffic for named incidents. Each scenario is a caller
//! policy (SDK retries stacked under application retries, an optional
//! fallback route, what to do when both are spent) run against a provider
//! whose health changes over time. The output is JSONL attempt records, the
//! same format `ingest` reads; the same seed always gives the same bytes.

use std::io::{self, Write};

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use attempt_core::finding::FindingKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum Scenario {
    /// A healthy day: interactive summaries, rare transient errors.
    Steady,
    /// A 20,000-document nightly batch hit by 20 minutes of 529s, with the
    /// SDK's max_retries=5 stacked under two application retries.
    #[value(name = "overnight-529-storm")]
    Overnight529Storm,
    /// Interactive chat: 429s on the primary, fallback to a second provider.
    RateLimitFallback,
    /// 429 insufficient_quota: retries with backoff, which create no credit.
    QuotaExhausted,
    /// A gateway serves some requests from another provider than requested.
    GatewayReroute,
    /// Recovery code that breaks the rules: SDK defaults (5 retries) under
    /// app retries that retry everything, 400 context_length_exceeded and
    /// insufficient_quota included, and retry-after ignored.
    NaiveRetries,
    /// Falling back where it must not: after a safety refusal, and after a
    /// stream broke with output already shown to the user.
    UnsafeFallback,
    /// A nightly report job on the cheaper tiers: half through the Batch
    /// API, half on the flex tier.
    ReportBatch,
    /// Long contracts reviewed with a one-hour prompt cache: prompts past
    /// the model's long-context threshold, written to the cache once and
    /// read from it by every retry.
    LongDocuments,
}

#[derive(Debug, Clone)]
pub struct SimOptions {
    pub scenario: Scenario,
    /// Workflows to simulate; each scenario has its own default.
    pub workflows: Option<u64>,
    pub seed: u64,
    pub start: DateTime<Utc>,
    /// Spread the workflows over this instead of the scenario's own span
    /// (hours): to replay an incident into a live service in seconds.
    pub span: Option<Duration>,
}

/// The default start: a fixed night, so runs are reproducible.
pub fn default_start() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-28T02:00:00Z").expect("valid constant").with_timezone(&Utc)
}

/// Writes the state changes of the scenario's gateway breaker (JSONL
/// records of `"type": "circuit"`, docs/record-format.md, "Breaker
/// timelines"), apart from its attempts so that a reader of attempt lines
/// never meets another kind of record; returns how many (none for a
/// scenario without a breaker).
pub fn simulate_breaker(options: &SimOptions, out: &mut impl Write) -> io::Result<u64> {
    let spec = ScenarioSpec::of(options.scenario);
    let arrivals = options.span.filter(|s| s.num_milliseconds() > 0).unwrap_or(spec.span);
    let mut line = Vec::with_capacity(256);
    let mut written = 0;
    for (elapsed, state) in spec.breaker {
        let at =
            options.start + Duration::milliseconds((arrivals.num_milliseconds() as f64 * elapsed) as i64);
        let change = serde_json::json!({
            "type": "circuit", "at": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "provider": spec.primary.provider, "model": spec.primary.model, "state": state,
            "reason": if *state == "open" { "429s from the primary" } else { "cooldown elapsed" },
        });
        line.clear();
        serde_json::to_writer(&mut line, &change)?;
        line.push(b'\n');
        out.write_all(&line)?;
        written += 1;
    }
    out.flush()?;
    Ok(written)
}

/// Writes the scenario's records; returns how many.
pub fn simulate(options: &SimOptions, out: &mut impl Write) -> io::Result<u64> {
    run(options, out, false).map(|(written, _)| written)
}

pub mod bill;
mod truth;

pub use truth::{Shorter, SimAttempt, SimWorkflow, Truth};

impl Truth {
    /// The retry budget's finding is about minutes, not workflows: its
    /// (minutes, retries) under the built-in budget, from each workflow
    /// name's (first attempts, retries) by the minute they started.
    fn add_retry_minutes(&mut self, minutes: &std::collections::BTreeMap<(&str, i64), (u64, u64)>) {
        use attempt_core::policy::{DEFAULT_RETRY_BUDGET, DEFAULT_RETRY_BUDGET_FLOOR};
        for (first, retries) in minutes.values() {
            if *retries > DEFAULT_RETRY_BUDGET_FLOOR && *retries as f64 > DEFAULT_RETRY_BUDGET * *first as f64
            {
                let entry = self.findings.entry(FindingKind::OverRetryBudget).or_default();
                entry.0 += 1;
                entry.1 += retries;
            }
        }
    }

    fn add(&mut self, workflow: &Tally) {
        for (finding, attempts) in &workflow.attempts {
            if *attempts > 0 {
                let entry = self.findings.entry(*finding).or_default();
                entry.0 += 1;
                entry.1 += attempts;
            }
        }
    }
}

/// One workflow's wrong moves, by finding.
#[derive(Default)]
struct Tally {
    attempts: std::collections::BTreeMap<FindingKind, u64>,
    /// Layers that retried the same route after a failure, and those retries.
    retry_layers: std::collections::BTreeSet<&'static str>,
    retries: u64,
}

impl Tally {
    fn count(&mut self, finding: FindingKind) {
        *self.attempts.entry(finding).or_default() += 1;
    }

    fn finish(mut self) -> Tally {
        if self.retry_layers.len() > 1 {
            self.attempts.insert(FindingKind::StackedRetries, self.retries);
        }
        self
    }
}

/// Writes the scenario's records; returns how many, and the ground truth.
pub fn simulate_with_truth(options: &SimOptions, out: &mut impl Write) -> io::Result<(u64, Truth)> {
    run(options, out, true)
}

/// `keep_attempts`: also list each workflow's attempts in the truth.
fn run(options: &SimOptions, out: &mut impl Write, keep_attempts: bool) -> io::Result<(u64, Truth)> {
    let mut truth = Truth::default();
    let spec = ScenarioSpec::of(options.scenario);
    // A shorter span only brings arrivals closer together: each workflow
    // still meets the provider's health of its moment in the scenario, and
    // its retries wait as long as they would have.
    let arrivals = options.span.filter(|s| s.num_milliseconds() > 0).unwrap_or(spec.span);
    let workflows = options.workflows.unwrap_or(spec.default_workflows);
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let mut written = 0;
    let mut line = Vec::with_capacity(512);
    let mut minutes = std::collections::BTreeMap::new();
    let mut payment_due = spec.payment_required_at;
    for index in 0..workflows {
        let arrival = arrivals.num_milliseconds() as f64 * index as f64 / workflows.max(1) as f64;
        let start = options.start + Duration::milliseconds(arrival as i64 + rng.random_range(0..1000));
        let elapsed = (start - options.start).num_milliseconds() as f64 / arrivals.num_milliseconds() as f64;
        let workflow_id = format!("{}-{index:06}", spec.prefix);
        let (records, tally) =
            run_workflow(&spec, &workflow_id, index, start, elapsed, &mut payment_due, &mut rng);
        truth.add(&tally.finish());
        if keep_attempts {
            let attempts = records
                .iter()
                .map(|r| SimAttempt {
                    sdk_retry: r.sdk_retry,
                    app_retry: r.app_retry,
                    fallback: r.route == "fallback",
                    error_code: r.error_code,
                    start_ms: r.start_ms,
                    duration_ms: r.duration_ms,
                    served: (r.served_provider.unwrap_or(r.provider), r.served_model.unwrap_or(r.model)),
                    batch: r.batch,
                    service_tier: r.service_tier,
                    input_tokens: r.input_tokens,
                    cached_input_tokens: r.cached_input_tokens,
                    cache_write_input_tokens: r.cache_write_input_tokens,
                    cache_write_1h_input_tokens: r.cache_write_1h_input_tokens,
                    output_tokens: r.output_tokens,
                })
                .collect();
            truth.workflows.push(SimWorkflow { id: workflow_id.clone(), attempts });
        }
        for (place, record) in records.iter().enumerate() {
            let minute = record.start_ms.div_euclid(60_000);
            let (first, retries) = minutes.entry((record.workflow, minute)).or_insert((0u64, 0u64));
            if place == 0 { *first += 1 } else { *retries += 1 }
        }
        for record in records {
            line.clear();
            serde_json::to_writer(&mut line, &record)?;
            line.push(b'\n');
            out.write_all(&line)?;
            written += 1;
        }
    }
    truth.add_retry_minutes(&minutes);
    out.flush()?;
    Ok((written, truth))
}

#[derive(Debug, Clone, Copy)]
struct RouteSpec {
    provider: &'static str,
    model: &'static str,
}

/// What happened to one call. `billed`: the input was billed (the call ran
/// until a deadline); `streamed`: it had produced output by then;
/// `visible`: that output was already shown to the user.
enum Result_ {
    Ok,
    Fail(Failure),
}

#[derive(Clone, Copy)]
struct Failure {
    http: Option<i32>,
    code: &'static str,
    retry_after_ms: Option<f64>,
    billed: bool,
    streamed: bool,
    visible: bool,
}

impl Failure {
    fn new(http: Option<i32>, code: &'static str) -> Failure {
        Failure { http, code, retry_after_ms: None, billed: false, streamed: false, visible: false }
    }
}

impl Result_ {
    fn fail(http: Option<i32>, code: &'static str) -> Result_ {
        Result_::Fail(Failure::new(http, code))
    }

    /// A 429 asking to wait `wait_ms`.
    fn rate_limited(wait_ms: f64) -> Result_ {
        Result_::Fail(Failure {
            retry_after_ms: Some(wait_ms),
            ..Failure::new(Some(429), "rate_limit_exceeded")
        })
    }
}

struct ScenarioSpec {
    prefix: &'static str,
    workflow: &'static str,
    default_workflows: u64,
    span: Duration,
    primary: RouteSpec,
    fallback: Option<RouteSpec>,
    sdk_retries: u32,
    app_retries: u32,
    /// Whether the application retries even errors a retry cannot fix.
    naive_app_retry: bool,
    /// Whether the SDK waits its own backoff instead of the retry-after.
    ignore_retry_after: bool,
    /// Whether the caller falls back whatever the failure (a refusal, a
    /// stream already shown) instead of only after retryable ones.
    fallback_on_any: bool,
    /// Layer of the first call of each application try.
    entry_layer: &'static str,
    /// Share of exhausted workflows that are queued instead of failed closed.
    queue_share: f64,
    /// Share of exhausted workflows answered with a degraded response.
    degrade_share: f64,
    /// Input / output token ranges and the cached share of input.
    input_tokens: (i64, i64),
    output_tokens: (i64, i64),
    cached_share: f64,
    health: fn(route: usize, elapsed: f64, rng: &mut ChaCha8Rng) -> Result_,
    /// Gateway reroutes: (probability, served provider, served model).
    reroutes: &'static [(f64, &'static str, &'static str)],
    /// The share of its requests limit a route's answers say remains at
    /// `elapsed` (`None`: its emitter captures no headers). A function of
    /// time alone, never of the random draws, so every other figure of a
    /// scenario stays as it was; a 429 says 0.
    headroom: fn(route: usize, elapsed: f64) -> Option<f64>,
    /// The primary's breaker as its gateway reports it: (elapsed, state)
    /// changes, written as state-change records at their instants. Fixed
    /// instants, never of the random draws, so no other figure moves.
    breaker: &'static [(f64, &'static str)],
    /// The account runs out of balance once: the first primary attempt
    /// started at or after this elapsed share is answered 402
    /// `insufficient_balance`, which no retry fixes, so the caller falls
    /// back (another provider bills another account) without retrying.
    payment_required_at: Option<f64>,
    /// How workflow `index` is billed: through a batch API, and on which
    /// service tier (`None`: the standard tier, unstated). A function of
    /// the index alone, so no random draw moves.
    tier: fn(index: u64) -> (Option<bool>, Option<&'static str>),
    /// The share of its input a workflow's first billed attempt writes to a
    /// one-hour prompt cache; every later attempt reads it from there.
    one_hour_cache_share: f64,
}

/// Requests a minute the simulated account may send.
const SIMULATED_REQUEST_LIMIT: i64 = 10_000;

fn background(rng: &mut ChaCha8Rng) -> Result_ {
    let p: f64 = rng.random();
    if p < 0.010 {
        Result_::fail(Some(529), "overloaded_error")
    } else if p < 0.013 {
        Result_::fail(Some(500), "api_error")
    } else if p < 0.015 {
        // No first token in time: the input billed, no output.
        Result_::Fail(Failure { billed: true, ..Failure::new(None, "APITimeoutError") })
    } else {
        Result_::Ok
    }
}

impl ScenarioSpec {
    fn of(scenario: Scenario) -> Self {
        let base = ScenarioSpec {
            prefix: "steady",
            workflow: "summary-interactive",
            default_workflows: 5_000,
            span: Duration::hours(2),
            primary: RouteSpec { provider: "openai", model: "gpt-4.1-mini" },
            fallback: Some(RouteSpec { provider: "anthropic", model: "claude-haiku-4-5" }),
            sdk_retries: 2,
            app_retries: 1,
            naive_app_retry: false,
            ignore_retry_after: false,
            fallback_on_any: false,
            entry_layer: "app",
            queue_share: 0.0,
            degrade_share: 0.5,
            input_tokens: (800, 4_000),
            output_tokens: (150, 600),
            cached_share: 0.5,
            health: |_, _, rng| background(rng),
            reroutes: &[],
            headroom: |_, _| None,
            breaker: &[],
            payment_required_at: None,
            tier: |_| (None, None),
            one_hour_cache_share: 0.0,
        };
        match scenario {
            Scenario::Steady => base,
            Scenario::Overnight529Storm => ScenarioSpec {
                prefix: "storm",
                workflow: "nightly-classify",
                default_workflows: 20_000,
                primary: RouteSpec { provider: "anthropic", model: "claude-haiku-4-5" },
                fallback: None,
                sdk_retries: 5,
                app_retries: 2,
                degrade_share: 0.0,
                input_tokens: (2_000, 6_000),
                output_tokens: (40, 200),
                cached_share: 0.4,
                // The provider is overloaded from 02:40 to 03:00.
                health: |_, elapsed, rng| {
                    if (1.0 / 3.0..0.5).contains(&elapsed) {
                        let p: f64 = rng.random();
                        if p < 0.60 {
                            return Result_::fail(Some(529), "overloaded_error");
                        }
                        if p < 0.85 {
                            // The stream began, then the deadline hit: input billed, output partial.
                            return Result_::Fail(Failure {
                                billed: true,
                                streamed: true,
                                ..Failure::new(None, "APITimeoutError")
                            });
                        }
                    }
                    background(rng)
                },
                ..base
            },
            Scenario::RateLimitFallback => ScenarioSpec {
                prefix: "chat",
                workflow: "chat-interactive",
                default_workflows: 5_000,
                primary: RouteSpec { provider: "openai", model: "gpt-4o" },
                fallback: Some(RouteSpec { provider: "anthropic", model: "claude-sonnet-4-5" }),
                sdk_retries: 2,
                app_retries: 0,
                degrade_share: 0.6,
                input_tokens: (1_500, 8_000),
                output_tokens: (200, 900),
                cached_share: 0.6,
                health: |route, elapsed, rng| {
                    if route == 0 && (0.3..0.7).contains(&elapsed) && rng.random::<f64>() < 0.7 {
                        return Result_::rate_limited(rng.random_range(2_000.0..20_000.0_f64).round());
                    }
                    background(rng)
                },
                // The primary's requests limit drains from half left towards
                // the 429s at 0.3 (under 10 % from 0.24: minutes of warning),
                // stays nearly spent while they last, and recovers after.
                headroom: |route, elapsed| {
                    (route == 0).then(|| match elapsed {
                        e if e < 0.3 => 0.5 * (0.3 - e) / 0.3,
                        e if e < 0.7 => 0.01,
                        _ => 0.8,
                    })
                },
                // The gateway's breaker opens a minute into the 429s, lets a
                // probe through twice (the first fails and it opens again),
                // and closes after the second.
                breaker: &[
                    (0.31, "open"),
                    (0.45, "half_open"),
                    (0.46, "open"),
                    (0.70, "half_open"),
                    (0.71, "closed"),
                ],
                // Late in the night, after the 429s, the account's balance
                // runs out for a moment: one 402.
                payment_required_at: Some(0.85),
                ..base
            },
            Scenario::QuotaExhausted => ScenarioSpec {
                prefix: "quota",
                workflow: "support-triage",
                default_workflows: 3_000,
                primary: RouteSpec { provider: "openai", model: "gpt-4.1-mini" },
                fallback: None,
                sdk_retries: 2,
                app_retries: 3,
                naive_app_retry: true,
                queue_share: 0.3,
                degrade_share: 0.0,
                health: |_, elapsed, rng| {
                    if elapsed >= 0.55 {
                        return Result_::fail(Some(429), "insufficient_quota");
                    }
                    background(rng)
                },
                ..base
            },
            Scenario::GatewayReroute => ScenarioSpec {
                prefix: "gw",
                workflow: "agent-step",
                default_workflows: 5_000,
                primary: RouteSpec { provider: "anthropic", model: "claude-sonnet-4-5" },
                fallback: Some(RouteSpec { provider: "openai", model: "gpt-4.1" }),
                entry_layer: "gateway",
                input_tokens: (3_000, 12_000),
                output_tokens: (100, 1_200),
                cached_share: 0.7,
                // As the clouds name the model: Bedrock's US inference
                // profile (its price 10 % above the global one) and Vertex
                // AI's versioned name.
                reroutes: &[
                    (0.35, "aws.bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
                    (0.05, "gcp.vertex_ai", "claude-sonnet-4-5@20250929"),
                ],
                ..base
            },
            Scenario::NaiveRetries => ScenarioSpec {
                prefix: "naive",
                workflow: "extract-invoice",
                default_workflows: 3_000,
                primary: RouteSpec { provider: "openai", model: "gpt-4.1-mini" },
                fallback: None,
                sdk_retries: 5,
                app_retries: 2,
                naive_app_retry: true,
                ignore_retry_after: true,
                degrade_share: 0.0,
                input_tokens: (2_000, 30_000),
                health: |_, elapsed, rng| {
                    let p: f64 = rng.random();
                    if p < 0.03 {
                        // A 400 context_length_exceeded on 3 % of calls, which
                        // this caller sends again as is.
                        return Result_::fail(Some(400), "context_length_exceeded");
                    }
                    if (0.4..0.6).contains(&elapsed) {
                        if p < 0.10 {
                            return Result_::fail(Some(429), "insufficient_quota");
                        }
                        if p < 0.50 {
                            return Result_::rate_limited(rng.random_range(5_000.0..30_000.0_f64).round());
                        }
                    }
                    background(rng)
                },
                ..base
            },
            Scenario::UnsafeFallback => ScenarioSpec {
                prefix: "unsafe",
                workflow: "companion-chat",
                default_workflows: 3_000,
                primary: RouteSpec { provider: "anthropic", model: "claude-sonnet-4-5" },
                fallback: Some(RouteSpec { provider: "openai", model: "gpt-4.1-mini" }),
                sdk_retries: 0,
                app_retries: 0,
                fallback_on_any: true,
                degrade_share: 0.0,
                health: |route, _, rng| {
                    if route == 0 {
                        let p: f64 = rng.random();
                        if p < 0.05 {
                            return Result_::fail(Some(400), "content_filter");
                        }
                        if p < 0.09 {
                            // The stream broke mid-answer, after the user saw it.
                            return Result_::Fail(Failure {
                                billed: true,
                                streamed: true,
                                visible: true,
                                ..Failure::new(None, "stream_interrupted")
                            });
                        }
                    }
                    background(rng)
                },
                ..base
            },
            Scenario::ReportBatch => ScenarioSpec {
                prefix: "report",
                workflow: "nightly-report",
                default_workflows: 2_000,
                primary: RouteSpec { provider: "openai", model: "gpt-5" },
                fallback: None,
                sdk_retries: 2,
                app_retries: 1,
                degrade_share: 0.0,
                input_tokens: (2_000, 12_000),
                output_tokens: (300, 1_500),
                cached_share: 0.3,
                tier: |index| if index % 2 == 0 { (Some(true), None) } else { (None, Some("flex")) },
                ..base
            },
            Scenario::LongDocuments => ScenarioSpec {
                prefix: "contract",
                workflow: "contract-review",
                default_workflows: 1_000,
                primary: RouteSpec { provider: "anthropic", model: "claude-haiku-5-5" },
                fallback: None,
                sdk_retries: 2,
                app_retries: 1,
                degrade_share: 0.0,
                // About half past the model's 100,000-token threshold.
                input_tokens: (40_000, 160_000),
                output_tokens: (500, 3_000),
                cached_share: 0.0,
                one_hour_cache_share: 0.9,
                ..base
            },
        }
    }
}

/// The JSONL wire form written by `simulate`.
#[derive(Serialize)]
struct Record<'a> {
    workflow_id: &'a str,
    attempt_id: String,
    attempt: u32,
    started_at: String,
    workflow: &'static str,
    layer: &'static str,
    provider: &'static str,
    model: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    served_provider: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    served_model: Option<&'static str>,
    route: &'static str,
    status: &'static str,
    duration_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    http_status: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_code: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    visible_output: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ratelimit_remaining_requests: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ratelimit_limit_requests: Option<i64>,
    input_tokens: i64,
    output_tokens: i64,
    cached_input_tokens: i64,
    #[serde(skip_serializing_if = "is_zero")]
    cache_write_input_tokens: i64,
    #[serde(skip_serializing_if = "is_zero")]
    cache_write_1h_input_tokens: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    batch: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    service_tier: Option<&'static str>,
    decision: &'static str,
    #[serde(skip)]
    start_ms: i64,
    #[serde(skip)]
    sdk_retry: u32,
    #[serde(skip)]
    app_retry: u32,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// Failures a retry of the same request cannot fix (classes quota,
/// request, policy, auth: what the audit's built-in policy never retries).
fn retryable(code: &str) -> bool {
    !matches!(
        code,
        "insufficient_quota"
            | "insufficient_balance"
            | "context_length_exceeded"
            | "content_filter"
            | "invalid_api_key"
    )
}

/// Failures of the account, not of the request: another provider, billed to
/// another account, can answer, though the same route cannot.
fn another_account_answers(code: &str) -> bool {
    matches!(code, "insufficient_quota" | "insufficient_balance")
}

fn run_workflow<'a>(
    spec: &ScenarioSpec,
    workflow_id: &'a str,
    index: u64,
    start: DateTime<Utc>,
    elapsed: f64,
    payment_due: &mut Option<f64>,
    rng: &mut ChaCha8Rng,
) -> (Vec<Record<'a>>, Tally) {
    let mut records: Vec<Record<'a>> = Vec::new();
    let mut tally = Tally::default();
    // Whether an earlier attempt showed output: every later one replays.
    let mut shown_before = false;
    let mut t = start;
    let mut route_index = 0usize;
    let mut app_tries_left = spec.app_retries;
    let mut sdk_tries_left = spec.sdk_retries;
    let mut layer = spec.entry_layer;
    // What the next attempt is in the callers' terms (SimAttempt).
    let (mut sdk_retry, mut app_retry) = (0u32, 0u32);
    let input = rng.random_range(spec.input_tokens.0..=spec.input_tokens.1);
    let mut cached = (input as f64 * spec.cached_share * rng.random::<f64>()) as i64;
    let (batch, service_tier) = (spec.tier)(index);
    // The prompt the first billed attempt writes to the one-hour cache, and
    // every later one reads.
    let cacheable = (input as f64 * spec.one_hour_cache_share) as i64;
    let mut cache_written = false;
    let span_ms = spec.span.num_milliseconds() as f64;
    loop {
        let route = if route_index == 0 { spec.primary } else { spec.fallback.unwrap_or(spec.primary) };
        let now_elapsed = elapsed + (t - start).num_milliseconds() as f64 / span_ms;
        let result = match (spec.health)(route_index, now_elapsed, rng) {
            _ if route_index == 0 && payment_due.is_some_and(|at| now_elapsed >= at) => {
                *payment_due = None;
                Result_::fail(Some(402), "insufficient_balance")
            }
            result => result,
        };
        let rerouted = (layer == "gateway" || spec.entry_layer == "gateway")
            .then(|| {
                let p: f64 = rng.random();
                let mut acc = 0.0;
                spec.reroutes.iter().find(|(share, _, _)| {
                    acc += share;
                    p < acc
                })
            })
            .flatten()
            .filter(|_| route_index == 0);
        let n = records.len() as u32;
        let mut record = Record {
            workflow_id,
            attempt_id: format!("{workflow_id}-{n}"),
            attempt: n,
            started_at: t.to_rfc3339_opts(SecondsFormat::Millis, true),
            start_ms: t.timestamp_millis(),
            workflow: spec.workflow,
            layer,
            provider: route.provider,
            model: route.model,
            served_provider: rerouted.map(|r| r.1),
            served_model: rerouted.map(|r| r.2),
            route: if route_index == 0 { "primary" } else { "fallback" },
            status: "ok",
            duration_ms: 0.0,
            http_status: None,
            error_code: None,
            retry_after_ms: None,
            visible_output: None,
            ratelimit_remaining_requests: (spec.headroom)(route_index, now_elapsed).map(|share| {
                let limited = matches!(result, Result_::Fail(Failure { http: Some(429), .. }));
                if limited { 0 } else { (share * SIMULATED_REQUEST_LIMIT as f64).round() as i64 }
            }),
            ratelimit_limit_requests: (spec.headroom)(route_index, now_elapsed)
                .map(|_| SIMULATED_REQUEST_LIMIT),
            input_tokens: 0,
            output_tokens: 0,
            cached_input_tokens: 0,
            cache_write_input_tokens: 0,
            cache_write_1h_input_tokens: 0,
            batch,
            service_tier,
            decision: "return",
            sdk_retry,
            app_retry,
        };
        if shown_before {
            tally.count(FindingKind::ReplayAfterCommit);
        }
        match result {
            Result_::Ok => {
                let output = rng.random_range(spec.output_tokens.0..=spec.output_tokens.1);
                record.http_status = Some(200);
                record.input_tokens = input;
                record.cached_input_tokens = cached;
                write_cache(&mut record, cacheable, &mut cache_written, &mut cached);
                record.output_tokens = output;
                record.duration_ms = (300.0 + output as f64 * rng.random_range(8.0..20.0)).round();
                records.push(record);
                return (records, tally);
            }
            Result_::Fail(Failure { http, code, retry_after_ms, billed, streamed, visible }) => {
                record.status = "error";
                record.http_status = http;
                record.error_code = Some(code);
                record.retry_after_ms = retry_after_ms;
                if visible {
                    record.visible_output = Some(true);
                }
                if billed {
                    record.input_tokens = input;
                    record.cached_input_tokens = cached;
                    write_cache(&mut record, cacheable, &mut cache_written, &mut cached);
                    // Drawn either way, so other scenarios' draws do not move.
                    let output = rng.random_range(0..=spec.output_tokens.1 / 2);
                    record.output_tokens = if streamed { output } else { 0 };
                    record.duration_ms = 30_000.0;
                } else {
                    record.duration_ms = rng.random_range(30.0..400.0_f64).round();
                }
                let wait_ms;
                if sdk_tries_left > 0 && (retryable(code) || spec.naive_app_retry) {
                    // The SDK retries below the application, invisibly to it.
                    sdk_tries_left -= 1;
                    record.decision = "retry";
                    let tried = spec.sdk_retries - sdk_tries_left;
                    (sdk_retry, app_retry) = (tried, 0);
                    let backoff = 500.0 * 2f64.powi(tried as i32) * rng.random_range(0.5..1.0);
                    wait_ms = match retry_after_ms {
                        Some(after) if !spec.ignore_retry_after => after,
                        _ => backoff,
                    };
                    layer = "sdk";
                } else if app_tries_left > 0 && (retryable(code) || spec.naive_app_retry) {
                    app_tries_left -= 1;
                    sdk_tries_left = spec.sdk_retries;
                    (sdk_retry, app_retry) = (0, spec.app_retries - app_tries_left);
                    record.decision = "retry";
                    wait_ms = 2_000.0 * 2f64.powi((spec.app_retries - app_tries_left) as i32);
                    layer = spec.entry_layer;
                } else if route_index == 0
                    && spec.fallback.is_some()
                    && (retryable(code) || another_account_answers(code) || spec.fallback_on_any)
                {
                    if code == "content_filter" {
                        tally.count(FindingKind::FallbackAfterPolicy);
                    }
                    route_index = 1;
                    sdk_tries_left = spec.sdk_retries;
                    (sdk_retry, app_retry) = (0, 0);
                    app_tries_left = 0;
                    record.decision = "fallback";
                    wait_ms = 50.0;
                    layer = spec.entry_layer;
                } else {
                    let p: f64 = rng.random();
                    record.decision = if p < spec.queue_share {
                        "queue"
                    } else if p < spec.queue_share + spec.degrade_share {
                        "degrade"
                    } else {
                        "fail_closed"
                    };
                    records.push(record);
                    return (records, tally);
                }
                // Another attempt follows this failure: what it breaks.
                if record.decision == "retry" {
                    tally.retry_layers.insert(layer);
                    tally.retries += 1;
                    if !retryable(code) {
                        tally.count(FindingKind::NonretryableRetried);
                    }
                    // The same provider, before the retry-after (with 1 s of slack) had passed?
                    if let Some(after) = retry_after_ms
                        && wait_ms.floor() < after - 1_000.0
                    {
                        tally.count(FindingKind::RetryAfterIgnored);
                    }
                }
                if code == "APITimeoutError" && record.output_tokens > 0 {
                    tally.count(FindingKind::TimeoutOutputRetried);
                }
                shown_before |= visible;
                t += Duration::milliseconds((record.duration_ms + wait_ms) as i64);
                records.push(record);
            }
        }
    }
}

/// The first billed attempt of a workflow with a cacheable prompt writes it
/// to the one-hour cache; the attempts after it read it.
fn write_cache(record: &mut Record, cacheable: i64, written: &mut bool, cached: &mut i64) {
    if cacheable == 0 {
        return;
    }
    if *written {
        record.cached_input_tokens = cacheable;
    } else {
        record.cache_write_input_tokens = cacheable;
        record.cache_write_1h_input_tokens = cacheable;
        *written = true;
        *cached = cacheable;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(scenario: Scenario, workflows: u64, seed: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let options =
            SimOptions { scenario, workflows: Some(workflows), seed, start: default_start(), span: None };
        simulate(&options, &mut out).unwrap();
        out
    }

    #[test]
    fn same_seed_same_bytes_other_seed_other_bytes() {
        assert_eq!(run(Scenario::Overnight529Storm, 300, 7), run(Scenario::Overnight529Storm, 300, 7));
        assert_ne!(run(Scenario::Overnight529Storm, 300, 7), run(Scenario::Overnight529Storm, 300, 8));
    }

    #[test]
    fn every_record_is_accepted_by_the_decoder() {
        for &scenario in <Scenario as clap::ValueEnum>::value_variants() {
            let out = String::from_utf8(run(scenario, 200, 1)).unwrap();
            let decoded = attempt_core::ingest::jsonl::decode_lines(&out, 1);
            assert!(decoded.rejections.is_empty(), "{scenario:?}: {:?}", decoded.rejections.first());
            assert!(decoded.attempts.len() >= 200);
        }
    }

    #[test]
    fn the_storm_stacks_sdk_retries_under_app_retries() {
        let out = String::from_utf8(run(Scenario::Overnight529Storm, 2_000, 1)).unwrap();
        let attempts = attempt_core::ingest::jsonl::decode_lines(&out, 1).attempts;
        let max_in_one = attempts.iter().map(|a| a.attempt.unwrap_or(0)).max().unwrap();
        // (1 + 5 SDK retries) x (1 + 2 app retries) = 18 calls for one document.
        assert_eq!(max_in_one, 17);
    }
}
