//! Rate-limit headroom (docs/record-format.md, "Headroom"): what the
//! provider said, on an attempt's response, about the limits the next
//! requests meet. Read from OpenAI's `x-ratelimit-*` and Anthropic's
//! `anthropic-ratelimit-*` response headers (as OpenTelemetry HTTP spans
//! and LiteLLM's payloads carry them) or from the record's own fields.
//! An absent or unreadable value is absent, never 0.

use chrono::{DateTime, Utc};

/// The limits a provider counts against, in the order a 429's kind is
/// decided when several are exhausted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LimitKind {
    Requests,
    Tokens,
    InputTokens,
    OutputTokens,
}

impl LimitKind {
    pub const ALL: [LimitKind; 4] = [Self::Requests, Self::Tokens, Self::InputTokens, Self::OutputTokens];

    /// The record's spelling (`input_tokens`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Requests => "requests",
            Self::Tokens => "tokens",
            Self::InputTokens => "input_tokens",
            Self::OutputTokens => "output_tokens",
        }
    }

    /// The headers' spelling (`input-tokens`).
    fn header_name(self) -> &'static str {
        match self {
            Self::Requests => "requests",
            Self::Tokens => "tokens",
            Self::InputTokens => "input-tokens",
            Self::OutputTokens => "output-tokens",
        }
    }
}

/// One kind's window, as the provider stated it when the attempt ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    pub remaining: Option<i64>,
    pub limit: Option<i64>,
    /// Milliseconds until the window resets.
    pub reset_ms: Option<i64>,
}

impl Window {
    fn is_empty(&self) -> bool {
        self.remaining.is_none() && self.limit.is_none() && self.reset_ms.is_none()
    }

    /// remaining / limit; none without both, or with a limit of 0.
    pub fn ratio(&self) -> Option<f64> {
        match (self.remaining, self.limit) {
            (Some(remaining), Some(limit)) if limit > 0 => Some(remaining as f64 / limit as f64),
            _ => None,
        }
    }
}

/// The four windows of one attempt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Headroom {
    windows: [Window; 4],
}

/// What a record field holds: remaining, limit or reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Remaining,
    Limit,
    ResetMs,
}

impl Headroom {
    pub fn window(&self, kind: LimitKind) -> &Window {
        &self.windows[kind as usize]
    }

    pub fn window_mut(&mut self, kind: LimitKind) -> &mut Window {
        &mut self.windows[kind as usize]
    }

    pub fn is_empty(&self) -> bool {
        self.windows.iter().all(Window::is_empty)
    }

    /// Each value this one lacks, taken from `other`.
    pub fn or(mut self, other: &Headroom) -> Headroom {
        for (mine, theirs) in self.windows.iter_mut().zip(&other.windows) {
            mine.remaining = mine.remaining.or(theirs.remaining);
            mine.limit = mine.limit.or(theirs.limit);
            mine.reset_ms = mine.reset_ms.or(theirs.reset_ms);
        }
        self
    }

    /// The record's twelve fields with their values, in the stored order:
    /// per kind, remaining, limit, reset.
    pub fn fields(&self) -> [(&'static str, Option<i64>); 12] {
        let mut out = [("", None); 12];
        for (i, (name, kind, part)) in FIELDS.iter().enumerate() {
            out[i] = (*name, self.get(*kind, *part));
        }
        out
    }

    pub fn get(&self, kind: LimitKind, part: Part) -> Option<i64> {
        let w = self.window(kind);
        match part {
            Part::Remaining => w.remaining,
            Part::Limit => w.limit,
            Part::ResetMs => w.reset_ms,
        }
    }

    pub fn set(&mut self, kind: LimitKind, part: Part, value: Option<i64>) {
        let w = self.window_mut(kind);
        match part {
            Part::Remaining => w.remaining = value,
            Part::Limit => w.limit = value,
            Part::ResetMs => w.reset_ms = value,
        }
    }
}

/// The record's field names, in the stored order.
pub const FIELDS: [(&str, LimitKind, Part); 12] = [
    ("ratelimit_remaining_requests", LimitKind::Requests, Part::Remaining),
    ("ratelimit_limit_requests", LimitKind::Requests, Part::Limit),
    ("ratelimit_reset_requests_ms", LimitKind::Requests, Part::ResetMs),
    ("ratelimit_remaining_tokens", LimitKind::Tokens, Part::Remaining),
    ("ratelimit_limit_tokens", LimitKind::Tokens, Part::Limit),
    ("ratelimit_reset_tokens_ms", LimitKind::Tokens, Part::ResetMs),
    ("ratelimit_remaining_input_tokens", LimitKind::InputTokens, Part::Remaining),
    ("ratelimit_limit_input_tokens", LimitKind::InputTokens, Part::Limit),
    ("ratelimit_reset_input_tokens_ms", LimitKind::InputTokens, Part::ResetMs),
    ("ratelimit_remaining_output_tokens", LimitKind::OutputTokens, Part::Remaining),
    ("ratelimit_limit_output_tokens", LimitKind::OutputTokens, Part::Limit),
    ("ratelimit_reset_output_tokens_ms", LimitKind::OutputTokens, Part::ResetMs),
];

/// The longest reset a provider can state and still be read: a day. A
/// reset further off is a unit mistake, not a window.
pub const MAX_RESET_MS: i64 = 24 * 3600 * 1000;

/// Headroom from response headers (`name`, `value`; names in any case,
/// and with `_` for `-` as older OpenTelemetry conventions wrote them),
/// the attempt having ended at `ended` (Anthropic's resets are instants).
/// LiteLLM's copies of the provider's own headers (`llm_provider-` before
/// the name) win over its other spellings. A value that cannot be read is
/// left out with a warning naming the header.
pub fn from_headers<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    ended: DateTime<Utc>,
    warnings: &mut Vec<String>,
) -> Headroom {
    let mut direct = Headroom::default();
    let mut relayed = Headroom::default();
    for (name, value) in headers {
        let lower = name.trim().to_ascii_lowercase().replace('_', "-");
        let (target, bare) = match lower.strip_prefix("llm-provider-") {
            Some(bare) => (&mut relayed, bare),
            None => (&mut direct, lower.as_str()),
        };
        let Some((kind, part, style)) = header_field(bare) else { continue };
        let value = value.trim();
        let read = match (part, style) {
            (Part::ResetMs, Style::OpenAi) => duration_ms(value),
            (Part::ResetMs, Style::Anthropic) => instant_ms(value, ended),
            _ => value.parse::<i64>().ok().filter(|n| *n >= 0),
        };
        match read {
            Some(v) if part != Part::ResetMs || v <= MAX_RESET_MS => target.set(kind, part, Some(v)),
            _ => warnings.push(format!("header `{name}`: `{value}` is not a {}, dropped", part.what())),
        }
    }
    relayed.or(&direct)
}

impl Part {
    fn what(self) -> &'static str {
        match self {
            Part::Remaining | Part::Limit => "count (a whole number >= 0)",
            Part::ResetMs => "reset (a duration such as 6m0s, or an instant, within a day)",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    OpenAi,
    Anthropic,
}

/// Which field a (lower-case) header sets.
fn header_field(name: &str) -> Option<(LimitKind, Part, Style)> {
    let part_of = |p: &str| match p {
        "remaining" => Some(Part::Remaining),
        "limit" => Some(Part::Limit),
        "reset" => Some(Part::ResetMs),
        _ => None,
    };
    if let Some(rest) = name.strip_prefix("x-ratelimit-") {
        // x-ratelimit-{limit,remaining,reset}-{requests,tokens}
        let (part, kind) = rest.split_once('-')?;
        let kind = LimitKind::ALL.into_iter().find(|k| k.header_name() == kind)?;
        return Some((kind, part_of(part)?, Style::OpenAi));
    }
    if let Some(rest) = name.strip_prefix("anthropic-ratelimit-") {
        // anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}
        let (kind, part) = rest.rsplit_once('-')?;
        let kind = LimitKind::ALL.into_iter().find(|k| k.header_name() == kind)?;
        return Some((kind, part_of(part)?, Style::Anthropic));
    }
    None
}

/// OpenAI's reset durations: `1s`, `6m0s`, `20ms`, `1h2m3.5s`, `0.5s`.
pub fn duration_ms(text: &str) -> Option<i64> {
    let mut total = 0.0_f64;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3_600_000.0,
            "m" => 60_000.0,
            "s" => 1_000.0,
            "ms" => 1.0,
            "us" | "µs" => 0.001,
            "ns" => 0.000_001,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * scale;
    }
    total.is_finite().then(|| total.round() as i64)
}

/// Anthropic's resets: an RFC 3339 instant, read as the milliseconds from
/// the attempt's end to it (0 when it is already past).
fn instant_ms(text: &str, ended: DateTime<Utc>) -> Option<i64> {
    let at = DateTime::parse_from_rfc3339(text).ok()?.with_timezone(&Utc);
    Some((at - ended).num_milliseconds().max(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn openai_durations_parse() {
        for (text, ms) in [
            ("1s", 1000),
            ("6m0s", 360_000),
            ("20ms", 20),
            ("1h2m3.5s", 3_723_500),
            ("0.5s", 500),
            ("17us", 0),
        ] {
            assert_eq!(duration_ms(text), Some(ms), "{text}");
        }
        for bad in ["", "s", "5", "5x", "-1s", "1.2.3s"] {
            assert_eq!(duration_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn openai_headers_fill_requests_and_tokens() {
        let mut warnings = Vec::new();
        let h = from_headers(
            [
                ("x-ratelimit-limit-requests", "500"),
                ("x-ratelimit-remaining-requests", "0"),
                ("x-ratelimit-reset-requests", "120ms"),
                ("X-RateLimit-Limit-Tokens", "30000"),
                ("x-ratelimit-remaining-tokens", "29000"),
                ("x-ratelimit-reset-tokens", "6m0s"),
                ("x-request-id", "req_1"),
            ],
            at("2026-11-01T10:00:00Z"),
            &mut warnings,
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            *h.window(LimitKind::Requests),
            Window { remaining: Some(0), limit: Some(500), reset_ms: Some(120) }
        );
        assert_eq!(h.window(LimitKind::Tokens).reset_ms, Some(360_000));
        assert_eq!(h.window(LimitKind::Requests).ratio(), Some(0.0), "0 remaining is 0 % headroom");
        assert!(h.window(LimitKind::InputTokens).remaining.is_none(), "absent is absent");
    }

    #[test]
    fn anthropic_resets_are_instants_read_from_the_attempts_end() {
        let mut warnings = Vec::new();
        let h = from_headers(
            [
                ("anthropic-ratelimit-input-tokens-limit", "40000"),
                ("anthropic-ratelimit-input-tokens-remaining", "1200"),
                ("anthropic-ratelimit-input-tokens-reset", "2026-11-01T10:00:30Z"),
                ("anthropic-ratelimit-output-tokens-reset", "2026-11-01T09:59:00Z"),
                ("anthropic-ratelimit-requests-remaining", "-3"),
            ],
            at("2026-11-01T10:00:00Z"),
            &mut warnings,
        );
        assert_eq!(
            *h.window(LimitKind::InputTokens),
            Window { remaining: Some(1200), limit: Some(40000), reset_ms: Some(30_000) }
        );
        assert_eq!(h.window(LimitKind::OutputTokens).reset_ms, Some(0), "a reset already past is now");
        assert_eq!(h.window(LimitKind::Requests).remaining, None);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("anthropic-ratelimit-requests-remaining"), "{warnings:?}");
    }

    #[test]
    fn a_limit_of_zero_has_no_headroom() {
        let w = Window { remaining: Some(0), limit: Some(0), reset_ms: None };
        assert_eq!(w.ratio(), None);
    }

    #[test]
    fn litellms_copies_of_the_providers_headers_win() {
        let mut warnings = Vec::new();
        let h = from_headers(
            [("x-ratelimit-remaining-requests", "7"), ("llm_provider-x-ratelimit-remaining-requests", "3")],
            at("2026-11-01T10:00:00Z"),
            &mut warnings,
        );
        assert_eq!(h.window(LimitKind::Requests).remaining, Some(3));
    }

    #[test]
    fn older_conventions_underscores_are_the_same_headers() {
        let mut warnings = Vec::new();
        let h = from_headers(
            [("x_ratelimit_remaining_tokens", "5"), ("anthropic_ratelimit_output_tokens_limit", "8000")],
            at("2026-11-01T10:00:00Z"),
            &mut warnings,
        );
        assert_eq!(h.window(LimitKind::Tokens).remaining, Some(5));
        assert_eq!(h.window(LimitKind::OutputTokens).limit, Some(8000));
    }

    #[test]
    fn fields_name_every_value_in_stored_order() {
        let mut h = Headroom::default();
        h.set(LimitKind::OutputTokens, Part::ResetMs, Some(9));
        let fields = h.fields();
        assert_eq!(fields[11], ("ratelimit_reset_output_tokens_ms", Some(9)));
        assert!(fields[..11].iter().all(|(_, v)| v.is_none()));
    }
}
