//! The providers' admin APIs, paged (docs/reconcile.md, "Fetching"): what
//! `reconcile fetch` and `serve --reconcile-every` read before importing.
//! Keys come from the environment and go only into request headers: never
//! into a log, an error or the database (a response that echoes one has it
//! replaced before any of its text is shown).

use std::time::Duration;

use chrono::{DateTime, Days, Utc};

use attempt_core::bill::{BillPages, BillSource, Bucket, MAX_INPUT_BYTES, read_pages};

/// The most pages one source's fetch reads: a year of daily buckets is a
/// dozen; a cursor that never ends is refused rather than followed.
pub const MAX_PAGES: usize = 1_000;
/// Tries of one page when the API answers 429 or 5xx.
pub const MAX_TRIES: u32 = 5;
/// The longest `retry-after` honoured; a longer one is waited this long.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);
/// One request's deadline.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// OpenRouter keeps this many days of activity.
pub const OPENROUTER_DAYS: u64 = 31;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Provider {
    Openai,
    Anthropic,
    Openrouter,
}

impl Provider {
    /// The environment variable holding the key.
    pub fn key_variable(self) -> &'static str {
        match self {
            Self::Openai => "OPENAI_ADMIN_KEY",
            Self::Anthropic => "ANTHROPIC_ADMIN_KEY",
            Self::Openrouter => "OPENROUTER_API_KEY",
        }
    }

    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::Openai => "https://api.openai.com",
            Self::Anthropic => "https://api.anthropic.com",
            Self::Openrouter => "https://openrouter.ai",
        }
    }

    pub fn sources(self) -> &'static [BillSource] {
        match self {
            Self::Openai => &[BillSource::OpenaiUsage, BillSource::OpenaiCosts],
            Self::Anthropic => &[BillSource::AnthropicUsage, BillSource::AnthropicCost],
            Self::Openrouter => &[BillSource::OpenrouterActivity],
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
            Self::Openrouter => "openrouter",
        }
    }
}

/// A key, kept out of `Debug` and every message.
#[derive(Clone)]
pub struct Key(String);

impl Key {
    /// The key of `provider` from its environment variable.
    pub fn from_env(provider: Provider) -> Result<Key, FetchError> {
        match std::env::var(provider.key_variable()) {
            Ok(key) if !key.trim().is_empty() => Ok(Key(key.trim().to_string())),
            _ => Err(FetchError::NoKey(provider.key_variable())),
        }
    }

    fn redact(&self, text: &str) -> String {
        text.replace(&self.0, "[key]")
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key([key])")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("no key: set {0}")]
    NoKey(&'static str),
    #[error("{url}: {reason}")]
    Request { url: String, reason: String },
    #[error("{url}: HTTP {status}: {body}")]
    Refused { url: String, status: u16, body: String },
    #[error("{source_name}: more than {MAX_PAGES} pages, or a cursor that repeats: refused")]
    EndlessPages { source_name: &'static str },
    #[error("{source_name}: {reason}")]
    Pages { source_name: &'static str, reason: String },
    #[error("{0}")]
    Window(String),
}

/// One source's pages as read, with how many requests and 429s it took.
#[derive(Debug)]
pub struct Fetched {
    pub pages: BillPages,
    pub requests: u32,
    pub throttled: u32,
}

/// What to read: a provider's sources over `[since, until)`.
#[derive(Debug, Clone)]
pub struct Plan {
    pub provider: Provider,
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    /// Without a trailing slash; the provider's own by default.
    pub base_url: String,
}

/// Reads every source of the plan's provider, page by page.
pub fn fetch(plan: &Plan, key: &Key) -> Result<Vec<Fetched>, FetchError> {
    if plan.since >= plan.until {
        return Err(FetchError::Window("--since must be before --until".into()));
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(REQUEST_TIMEOUT))
        .http_status_as_error(false)
        .build()
        .into();
    let client = Client { agent, key, base: plan.base_url.trim_end_matches('/') };
    plan.provider.sources().iter().map(|source| client.source(*source, plan)).collect()
}

struct Client<'a> {
    agent: ureq::Agent,
    key: &'a Key,
    base: &'a str,
}

/// A request's path and query, without the page cursor.
struct Request {
    path: &'static str,
    query: Vec<(&'static str, String)>,
}

impl Client<'_> {
    fn source(&self, source: BillSource, plan: &Plan) -> Result<Fetched, FetchError> {
        let mut fetched = Fetched { pages: empty(source), requests: 0, throttled: 0 };
        if source == BillSource::OpenrouterActivity {
            return self.openrouter_days(plan, fetched);
        }
        let request = request_of(source, plan);
        let mut bodies = Vec::new();
        let mut total = 0usize;
        let mut cursor: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        loop {
            if bodies.len() >= MAX_PAGES {
                return Err(FetchError::EndlessPages { source_name: source.name() });
            }
            let body = self.get(&request, cursor.as_deref(), &mut fetched)?;
            total += body.len();
            if total > MAX_INPUT_BYTES {
                return Err(FetchError::Pages {
                    source_name: source.name(),
                    reason: format!("more than {MAX_INPUT_BYTES} bytes of pages"),
                });
            }
            let next = next_page(&body);
            bodies.push(body);
            match next {
                Some(next) if seen.insert(next.clone()) => cursor = Some(next),
                Some(_) => return Err(FetchError::EndlessPages { source_name: source.name() }),
                None => break,
            }
        }
        fetched.pages = read_pages(source, &bodies.join("\n"))
            .map_err(|reason| FetchError::Pages { source_name: source.name(), reason })?;
        Ok(fetched)
    }

    /// OpenRouter's activity, one UTC day at a time: a day asked for and
    /// answered with nothing is covered (nothing was billed), which a
    /// listing of all days cannot say.
    fn openrouter_days(&self, plan: &Plan, mut fetched: Fetched) -> Result<Fetched, FetchError> {
        let source = BillSource::OpenrouterActivity;
        let first = plan.since.date_naive();
        let last = (plan.until - chrono::Duration::nanoseconds(1)).date_naive();
        let days = (last - first).num_days() as u64 + 1;
        if days > OPENROUTER_DAYS {
            return Err(FetchError::Window(format!(
                "OpenRouter keeps {OPENROUTER_DAYS} days of activity; asked for {days}"
            )));
        }
        let mut bodies = Vec::new();
        let mut asked = Vec::new();
        for n in 0..days {
            let day = first.checked_add_days(Days::new(n)).unwrap_or(first);
            let request = Request {
                path: "/api/v1/activity",
                query: vec![("date", day.format("%Y-%m-%d").to_string())],
            };
            bodies.push(self.get(&request, None, &mut fetched)?);
            let start = day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
            asked.push(Bucket { start, end: start + chrono::Duration::days(1) });
        }
        let mut pages = read_pages(source, &bodies.join("\n"))
            .map_err(|reason| FetchError::Pages { source_name: source.name(), reason })?;
        for bucket in asked {
            if !pages.buckets.contains(&bucket) {
                pages.buckets.push(bucket);
            }
        }
        pages.buckets.sort();
        fetched.pages = pages;
        Ok(fetched)
    }

    /// One page, retried on 429 and 5xx as the API asks (`retry-after`).
    fn get(
        &self,
        request: &Request,
        cursor: Option<&str>,
        fetched: &mut Fetched,
    ) -> Result<String, FetchError> {
        let url = format!("{}{}", self.base, request.path);
        let mut backoff = Duration::from_secs(1);
        let mut tries = 0;
        loop {
            tries += 1;
            let mut call = self.agent.get(&url);
            for (k, v) in &request.query {
                call = call.query(*k, v);
            }
            if let Some(cursor) = cursor {
                call = call.query("page", cursor);
            }
            call = match request.path {
                p if p.starts_with("/v1/organizations/") => {
                    call.header("x-api-key", &self.key.0).header("anthropic-version", "2023-06-01")
                }
                _ => call.header("Authorization", &format!("Bearer {}", self.key.0)),
            };
            fetched.requests += 1;
            let failed = |e: ureq::Error| FetchError::Request {
                url: url.clone(),
                reason: self.key.redact(&e.to_string()),
            };
            let mut response = call.call().map_err(failed)?;
            let status = response.status().as_u16();
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|s| Duration::from_secs(s).min(MAX_RETRY_AFTER));
            let body = response
                .body_mut()
                .with_config()
                .limit(MAX_INPUT_BYTES as u64)
                .read_to_string()
                .map_err(failed)?;
            if (200..300).contains(&status) {
                return Ok(body);
            }
            let retryable = status == 429 || (500..600).contains(&status);
            if !retryable || tries == MAX_TRIES {
                let body: String = self.key.redact(&body).chars().take(300).collect();
                return Err(FetchError::Refused { url, status, body });
            }
            if status == 429 {
                fetched.throttled += 1;
            }
            let wait = retry_after.unwrap_or(backoff);
            tracing::info!(url = %url, status, wait_ms = wait.as_millis() as u64, tries, "admin API asked to wait");
            std::thread::sleep(wait);
            backoff = (backoff * 2).min(MAX_RETRY_AFTER);
        }
    }
}

fn empty(source: BillSource) -> BillPages {
    BillPages { source, pages: 0, buckets: Vec::new(), facts: Vec::new() }
}

/// The query of a source's first page: daily buckets, grouped by every
/// dimension a cell can use.
fn request_of(source: BillSource, plan: &Plan) -> Request {
    let (since, until) = (plan.since, plan.until);
    match source {
        BillSource::OpenaiUsage => Request {
            path: "/v1/organization/usage/completions",
            query: vec![
                ("start_time", since.timestamp().to_string()),
                ("end_time", until.timestamp().to_string()),
                ("bucket_width", "1d".into()),
                ("group_by", "model".into()),
                ("group_by", "project_id".into()),
                ("group_by", "service_tier".into()),
                ("group_by", "batch".into()),
                ("limit", "31".into()),
            ],
        },
        BillSource::OpenaiCosts => Request {
            path: "/v1/organization/costs",
            query: vec![
                ("start_time", since.timestamp().to_string()),
                ("end_time", until.timestamp().to_string()),
                ("bucket_width", "1d".into()),
                ("group_by", "project_id".into()),
                ("group_by", "line_item".into()),
                ("limit", "180".into()),
            ],
        },
        BillSource::AnthropicUsage => Request {
            path: "/v1/organizations/usage_report/messages",
            query: vec![
                ("starting_at", since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
                ("ending_at", until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
                ("bucket_width", "1d".into()),
                ("group_by[]", "model".into()),
                ("group_by[]", "workspace_id".into()),
                ("group_by[]", "service_tier".into()),
                ("limit", "31".into()),
            ],
        },
        BillSource::AnthropicCost => Request {
            path: "/v1/organizations/cost_report",
            query: vec![
                ("starting_at", since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
                ("ending_at", until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
                ("group_by[]", "workspace_id".into()),
                ("group_by[]", "description".into()),
                ("limit", "31".into()),
            ],
        },
        BillSource::OpenrouterActivity => Request { path: "/api/v1/activity", query: Vec::new() },
    }
}

/// The cursor of the next page, when the API says there is one.
fn next_page(body: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Cursor {
        has_more: Option<bool>,
        next_page: Option<String>,
    }
    let cursor: Cursor = serde_json::from_str(body).ok()?;
    cursor.has_more.filter(|more| *more).and(cursor.next_page).filter(|p| !p.is_empty())
}
