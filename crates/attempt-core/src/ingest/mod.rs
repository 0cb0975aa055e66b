//! Wire formats in, domain `Attempt`s out.
//!
//! Every decoder returns `Decoded`: the attempts it could build and a
//! rejection for each record it could not. A bad record never fails the
//! records around it. The rules shared by every wire format (defaults, the
//! derived id, the derived error class, cross-field checks) live here in
//! `build_attempt`, so JSONL and OTLP cannot drift apart.

pub mod circuit;
pub mod format;
pub mod framing;
pub mod jsonl;
pub mod litellm;
mod numbers;
pub mod openrouter;
pub mod otlp;
pub mod source;

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use crate::classify::derive_error_class;
use crate::model::{
    Attempt, Circuit, CircuitChange, CommitState, Decision, ErrorClass, Layer, PicoUsd, Route, SpanRecord,
    Status, Tokens, name,
};

/// One record that could not be ingested: where it was and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// 1-based line number in its input (element index for a JSON array).
    pub line: u64,
    pub reason: String,
}

/// A record that was ingested, but with a value the decoder had to correct
/// or drop (docs/record-format.md, "Lenient values"): where and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub line: u64,
    pub reason: String,
}

/// Rejections and warnings one decode keeps with their reasons; the counts
/// take every one. A 20 MiB body of 10M bad lines keeps 1,000 reasons, not
/// 10M (every answer and summary lists fewer than this anyway).
pub const MAX_KEPT_NOTES: usize = 1000;

#[derive(Debug, Default)]
pub struct Decoded {
    pub attempts: Vec<Attempt>,
    /// OTLP spans to keep: a trace's attempts are derived from its stored
    /// spans, so they do not depend on how the spans were split across
    /// exports.
    pub spans: Vec<SpanRecord>,
    /// Breaker state changes (JSONL `"type": "circuit"` lines, OTLP
    /// `circuit.state_change` events).
    pub circuits: Vec<CircuitChange>,
    /// The first `MAX_KEPT_NOTES` rejections, in input order.
    pub rejections: Vec<Rejection>,
    /// Every rejection.
    pub rejected: u64,
    /// The first `MAX_KEPT_NOTES` warnings, in input order.
    pub warnings: Vec<Warning>,
    /// Every warning.
    pub warned: u64,
    /// Records kept: one per attempt built, one per model-call span kept
    /// (its attempts are derived with its trace), one per state change. With `rejected`, every
    /// record the input held (`received`).
    pub records: u64,
}

impl Decoded {
    /// The rejections and warnings alone, leaving the rows: what an answer
    /// reports once the rows went to the writer.
    pub fn take_notes(&mut self) -> Decoded {
        Decoded {
            rejections: std::mem::take(&mut self.rejections),
            rejected: self.rejected,
            warnings: std::mem::take(&mut self.warnings),
            warned: self.warned,
            records: self.records,
            ..Decoded::default()
        }
    }

    /// Every record the input held: kept or rejected. What an ingest
    /// answer's accepted, duplicates, conflicts and rejected add up to.
    pub fn received(&self) -> u64 {
        self.records + self.rejected
    }

    /// Counts a rejected record, keeping its reason while there is room.
    pub fn reject(&mut self, line: u64, reason: String) {
        self.rejected += 1;
        if self.rejections.len() < MAX_KEPT_NOTES {
            self.rejections.push(Rejection { line, reason });
        }
    }

    /// Counts a corrected value, keeping its reason while there is room.
    pub fn warn(&mut self, line: u64, reason: String) {
        self.warned += 1;
        if self.warnings.len() < MAX_KEPT_NOTES {
            self.warnings.push(Warning { line, reason });
        }
    }

    /// Keeps a built record with its warnings, or its rejection, at `line`.
    pub fn push_built(&mut self, line: u64, built: Result<Built, String>) {
        match built {
            Ok(Built { attempt, warnings }) => {
                self.attempts.push(attempt);
                self.records += 1;
                warnings.into_iter().for_each(|reason| self.warn(line, reason));
            }
            Err(reason) => self.reject(line, reason),
        }
    }

    /// Keeps a breaker state change, or its rejection, at `line`.
    pub fn push_circuit(&mut self, line: u64, change: Result<CircuitChange, String>) {
        match change {
            Ok(change) => {
                self.circuits.push(change);
                self.records += 1;
            }
            Err(reason) => self.reject(line, reason),
        }
    }

    /// Appends `other` (what followed in the same input).
    pub fn append(&mut self, other: Decoded) {
        self.append_renumbered(other, None);
    }

    /// Appends `other`, renumbering its notes to `line` (an OTLP export that
    /// was one line of a file).
    pub fn absorb_at(&mut self, other: Decoded, line: u64) {
        self.append_renumbered(other, Some(line));
    }

    fn append_renumbered(&mut self, other: Decoded, line: Option<u64>) {
        self.attempts.extend(other.attempts);
        self.spans.extend(other.spans);
        self.circuits.extend(other.circuits);
        self.records += other.records;
        let (unlisted_rejections, unlisted_warnings) =
            (other.rejected - other.rejections.len() as u64, other.warned - other.warnings.len() as u64);
        for r in other.rejections {
            self.reject(line.unwrap_or(r.line), r.reason);
        }
        for w in other.warnings {
            self.warn(line.unwrap_or(w.line), w.reason);
        }
        self.rejected += unlisted_rejections;
        self.warned += unlisted_warnings;
    }
}

/// The elements of a JSON array body, each left unparsed, so that a body's
/// records are decoded one at a time rather than held as one tree of values
/// (several times the body for small records).
pub fn array_elements(text: &str) -> Result<Vec<&serde_json::value::RawValue>, serde_json::Error> {
    serde_json::from_str(text)
}

/// What a decoded record holds besides its strings: the attempt, its
/// derived id, and its row in the writer's Arrow batch.
pub const RECORD_HELD_BYTES: usize = std::mem::size_of::<Attempt>() + 256;

/// At most what a record of `bytes` holds once decoded: `RECORD_HELD_BYTES`
/// and twice its bytes (its strings are parts of it, in the attempt and in
/// its row). Only an object becomes a record.
pub fn record_held_at_most(record: &str) -> usize {
    let record = record.trim();
    if record.starts_with('{') { RECORD_HELD_BYTES.saturating_add(record.len().saturating_mul(2)) } else { 0 }
}

/// Decodes JSON lines with `decode`, which maps one parsed record to its
/// attempts (several for a record that lists upstream tries). Blank lines
/// are skipped; `first_line` numbers a chunk that started mid-input; a line
/// that is not JSON, or that `decode` refuses, is a rejection at its number.
pub fn decode_json_lines(
    text: &str,
    first_line: u64,
    decode: impl Fn(serde_json::Value) -> Result<Vec<Built>, String>,
) -> Decoded {
    let mut decoded = Decoded::default();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        decode_json_record(line, first_line + index as u64, &decode, &mut decoded);
    }
    decoded
}

/// Decodes one JSON record (a line, or an element of an array) with
/// `decode` into `into`, as `decode_json_lines` does each line.
pub fn decode_json_record(
    text: &str,
    number: u64,
    decode: impl Fn(serde_json::Value) -> Result<Vec<Built>, String>,
    into: &mut Decoded,
) {
    match serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}")).and_then(decode) {
        Ok(built) => built.into_iter().for_each(|b| into.push_built(number, Ok(b))),
        Err(reason) => into.reject(number, reason),
    }
}

/// What `build_attempt` made of a record: the attempt and what it had to
/// correct.
#[derive(Debug)]
pub struct Built {
    pub attempt: Attempt,
    pub warnings: Vec<String>,
}

/// The fields as a wire format delivered them, before defaults and derived
/// values. Decoders fill this; `build_attempt` turns it into an `Attempt`.
#[derive(Debug, Default)]
pub struct AttemptFields {
    pub workflow_id: String,
    pub started_at: DateTime<Utc>,
    pub provider: String,
    pub model: String,
    pub status: Option<Status>,
    pub attempt_id: Option<String>,
    pub attempt: Option<i64>,
    pub workflow: Option<String>,
    pub layer: Option<Layer>,
    pub route: Option<Route>,
    pub route_group: Option<String>,
    pub served_provider: Option<String>,
    pub served_model: Option<String>,
    pub provider_request_id: Option<String>,
    pub billing_account: Option<String>,
    pub service_tier: Option<String>,
    pub batch: Option<bool>,
    pub web_search_requests: Option<i64>,
    /// The emitter's total token count, when it states one: it settles
    /// whether reasoning and tool-use prompt tokens were counted in or apart.
    pub total_tokens: Option<i64>,
    /// Prompt tokens a server-side tool used (Gemini's grounding), which
    /// some emitters count apart from the prompt.
    pub tool_use_prompt_tokens: Option<i64>,
    pub headroom: crate::ratelimit::Headroom,
    pub duration_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub http_status: Option<i32>,
    pub error_class: Option<ErrorClass>,
    pub error_code: Option<String>,
    pub retry_after_ms: Option<f64>,
    pub tokens: Tokens,
    pub cost: Option<PicoUsd>,
    /// A stated cost's currency other than USD (the cost is then unknown).
    pub cost_currency: Option<String>,
    pub commit_state: Option<CommitState>,
    pub visible_output: Option<bool>,
    pub decision: Option<Decision>,
    pub circuit: Option<Circuit>,
    pub extra: Option<String>,
    pub source_trace: Option<String>,
    /// Corrections a decoder already made (an HTTP status out of range).
    pub warnings: Vec<String>,
}

/// The longest duration, time to first token or retry-after an attempt can
/// state: 30 days. No call takes longer, and every derived sum of these
/// (microsecond latency sums, a retry's earliest allowed start) stays far
/// inside its integer type.
pub const MAX_DURATION_MS: f64 = 30.0 * 24.0 * 3600.0 * 1000.0;

/// The instants an attempt may start at: [2000-01-01, 2100-01-01). Outside
/// them a timestamp is a unit mistake (seconds read as milliseconds, say),
/// not a call.
pub fn start_range() -> (DateTime<Utc>, DateTime<Utc>) {
    let at = |year| {
        chrono::NaiveDate::from_ymd_opt(year, 1, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|t| t.and_utc())
            .unwrap_or_default()
    };
    (at(2000), at(2100))
}

/// Refuses values no real call has (checked here, so every wire format
/// refuses the same ones, naming the field).
fn check_bounds(fields: &AttemptFields) -> Result<(), String> {
    for (field, value) in [
        ("duration_ms", fields.duration_ms),
        ("ttft_ms", fields.ttft_ms),
        ("retry_after_ms", fields.retry_after_ms),
    ] {
        if let Some(ms) = value.filter(|ms| *ms > MAX_DURATION_MS) {
            return Err(format!(
                "field `{field}`: {ms} ms is more than 30 days ({MAX_DURATION_MS} ms), which no call takes"
            ));
        }
    }
    let (earliest, latest) = start_range();
    if fields.started_at < earliest || fields.started_at >= latest {
        return Err(format!(
            "field `started_at`: {} is outside 2000-01-01 to 2100-01-01 (a timestamp in other units?)",
            fields.started_at.to_rfc3339()
        ));
    }
    Ok(())
}

/// Applies the record format's defaults and derivations, and checks what no
/// single field can check alone.
pub fn build_attempt(mut fields: AttemptFields) -> Result<Built, String> {
    let status = fields.status.ok_or("missing required field `status`")?;
    check_bounds(&fields)?;
    let mut warnings = std::mem::take(&mut fields.warnings);
    let tokens = &mut fields.tokens;
    if let Some(one_hour) = tokens.cache_write_1h_input {
        match tokens.cache_write_input {
            // Only the one-hour part is known: every known write is it.
            None => tokens.cache_write_input = Some(one_hour),
            Some(all) if one_hour > all => {
                // Counted apart from the five-minute writes, as some
                // emitters split Anthropic's usage.
                let raised = all.saturating_add(one_hour);
                warnings.push(format!(
                    "cache_write_1h_input_tokens ({one_hour}) exceed cache_write_input_tokens ({all}): read as \
                     counted apart, cache_write_input_tokens raised to {raised}"
                ));
                tokens.cache_write_input = Some(raised);
            }
            Some(_) => {}
        }
    }
    if let Some(total) = fields.total_tokens {
        settle_by_total(tokens, total, fields.tool_use_prompt_tokens.unwrap_or(0), &mut warnings);
    }
    let cached = tokens.cached_input.unwrap_or(0);
    let cache_write = tokens.cache_write_input.unwrap_or(0);
    if cached.saturating_add(cache_write) > tokens.input.unwrap_or(0) {
        // Anthropic-style usage: input excludes the cache reads and writes.
        // Counting them in is the only reading under which the record holds.
        let input = tokens.input.unwrap_or(0);
        let raised = input.saturating_add(cached).saturating_add(cache_write);
        warnings.push(format!(
            "cached_input_tokens ({cached}) + cache_write_input_tokens ({cache_write}) exceed \
             input_tokens ({input}): read as counted apart, input_tokens raised to {raised}"
        ));
        tokens.input = Some(raised);
    }
    if let Some(reasoning) = tokens.reasoning_output {
        let output = tokens.output.unwrap_or(0);
        if reasoning > output {
            // Gemini-style usage: output excludes the thinking tokens. As
            // with cache reads, counting them in is the only reading under
            // which the record holds; both are billed as output.
            let raised = output.saturating_add(reasoning);
            warnings.push(format!(
                "reasoning_output_tokens ({reasoning}) exceed output_tokens ({output}): read as counted \
                 apart, output_tokens raised to {raised}"
            ));
            tokens.output = Some(raised);
        }
    }
    let provider = fields.provider.trim().to_string();
    let served_provider =
        fields.served_provider.map(|p| p.trim().to_string()).unwrap_or_else(|| provider.clone());
    let served_model = fields.served_model.unwrap_or_else(|| fields.model.clone());
    let layer = fields.layer.unwrap_or_default();
    let error_class = match (fields.error_class, status) {
        (Some(class), _) => Some(class),
        (None, Status::Error) => Some(derive_error_class(fields.error_code.as_deref(), fields.http_status)),
        (None, Status::Ok) => None,
    };
    let attempt_id = fields.attempt_id.unwrap_or_else(|| {
        derived_attempt_id(
            &fields.workflow_id,
            fields.attempt,
            fields.started_at,
            layer,
            &crate::providers::normalise(&provider),
            &fields.model,
        )
    });
    let attempt = Attempt {
        attempt_id,
        workflow_id: fields.workflow_id,
        started_at: fields.started_at,
        provider,
        model: fields.model,
        status,
        attempt: fields.attempt,
        workflow: fields.workflow,
        layer,
        route: fields.route,
        route_group: fields.route_group,
        served_provider,
        served_model,
        provider_request_id: fields.provider_request_id,
        billing_account: fields.billing_account,
        service_tier: fields.service_tier,
        batch: fields.batch,
        web_search_requests: fields.web_search_requests,
        headroom: fields.headroom,
        duration_ms: fields.duration_ms,
        ttft_ms: fields.ttft_ms,
        http_status: fields.http_status,
        error_class,
        error_code: fields.error_code,
        retry_after_ms: fields.retry_after_ms,
        tokens: fields.tokens,
        cost: fields.cost,
        cost_currency: fields.cost_currency,
        commit_state: fields.commit_state.unwrap_or_default(),
        visible_output: fields.visible_output,
        decision: fields.decision,
        circuit: fields.circuit,
        extra: fields.extra,
        source_trace: fields.source_trace,
        fingerprint: 0,
    };
    let attempt = Attempt { fingerprint: attempt.compute_fingerprint(), ..attempt };
    Ok(Built { attempt, warnings })
}

/// Counts each token once when an emitter's total says how it counted:
/// Gemini reports thoughts and tool-use prompt tokens apart from output and
/// prompt, and emitters copy its usage as is or add them in. The first
/// reading under which input and output add up to the total wins (none
/// added, the tool-use tokens, the thoughts, both); under none, the counts
/// stand as sent.
fn settle_by_total(tokens: &mut Tokens, total: i64, tool_use: i64, warnings: &mut Vec<String>) {
    let (input, output) = (tokens.input.unwrap_or(0), tokens.output.unwrap_or(0));
    let reasoning = tokens.reasoning_output.unwrap_or(0);
    for (tool_apart, thoughts_apart) in [(0, 0), (tool_use, 0), (0, reasoning), (tool_use, reasoning)] {
        if input.saturating_add(tool_apart).saturating_add(output).saturating_add(thoughts_apart) != total {
            continue;
        }
        if tool_apart > 0 {
            warnings.push(format!(
                "tool-use prompt tokens ({tool_apart}) counted apart from input_tokens ({input}), as the total \
                 ({total}) says: input_tokens raised to {}",
                input + tool_apart
            ));
            tokens.input = Some(input + tool_apart);
        }
        if thoughts_apart > 0 {
            warnings.push(format!(
                "reasoning_output_tokens ({thoughts_apart}) counted apart from output_tokens ({output}), as the \
                 total ({total}) says: output_tokens raised to {}",
                output + thoughts_apart
            ));
            tokens.output = Some(output + thoughts_apart);
        }
        return;
    }
}

/// The id of a record that carries none: a hash of what identifies the
/// attempt, with `started_at` as an instant (nanoseconds since the epoch) so
/// `...T01:00:00+01:00`, `...T00:00:00Z` and Unix milliseconds agree, and
/// with `layer` after its default so an absent layer equals `app`. Fields are
/// length-prefixed so no two tuples encode to the same bytes.
pub fn derived_attempt_id(
    workflow_id: &str,
    attempt: Option<i64>,
    started_at: DateTime<Utc>,
    layer: Layer,
    provider: &str,
    model: &str,
) -> String {
    let mut hasher = Sha256::new();
    let attempt = attempt.map(|n| n.to_string()).unwrap_or_default();
    let instant =
        started_at.timestamp_nanos_opt().map(|n| n.to_string()).unwrap_or_else(|| started_at.to_rfc3339());
    for part in [workflow_id, &attempt, &instant, name(layer), provider, model] {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    digest[..16].iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_counted_all_and_kept_up_to_the_bound() {
        let bad = "x\n".repeat(MAX_KEPT_NOTES * 3);
        let mut decoded = decode_json_lines(&bad, 10, |_| Ok(Vec::new()));
        assert_eq!(decoded.rejected, (MAX_KEPT_NOTES * 3) as u64);
        assert_eq!(decoded.rejections.len(), MAX_KEPT_NOTES);
        assert_eq!((decoded.rejections[0].line, decoded.rejections.last().unwrap().line), (10, 1009));
        let more = decode_json_lines("x\n", 1, |_| Ok(Vec::new()));
        decoded.append(more);
        assert_eq!(
            (decoded.rejected, decoded.rejections.len()),
            ((MAX_KEPT_NOTES * 3 + 1) as u64, MAX_KEPT_NOTES)
        );
        let mut one = Decoded::default();
        one.absorb_at(decoded, 7);
        assert_eq!((one.rejected, one.rejections[0].line), ((MAX_KEPT_NOTES * 3 + 1) as u64, 7));
    }

    fn fields() -> AttemptFields {
        AttemptFields {
            workflow_id: "w".into(),
            started_at: DateTime::from_timestamp_millis(1_795_831_200_000).unwrap(),
            provider: "OpenAI".into(),
            model: "gpt-4o".into(),
            status: Some(Status::Error),
            ..AttemptFields::default()
        }
    }

    /// Values no call has are refused at decode, naming the field, so they
    /// never reach a derivation (where `1e300` ms once overflowed a cast and
    /// stopped every writer).
    #[test]
    fn durations_and_starts_no_call_has_are_refused_by_name() {
        for field in ["duration_ms", "ttft_ms", "retry_after_ms"] {
            let mut f = fields();
            let value = Some(1e300);
            match field {
                "duration_ms" => f.duration_ms = value,
                "ttft_ms" => f.ttft_ms = value,
                _ => f.retry_after_ms = value,
            }
            let err = build_attempt(f).unwrap_err();
            assert!(err.starts_with(&format!("field `{field}`: ")) && err.contains("30 days"), "{err}");
        }
        let mut at_bound = fields();
        at_bound.duration_ms = Some(MAX_DURATION_MS);
        assert!(build_attempt(at_bound).is_ok());
        let mut seconds_as_millis = fields();
        seconds_as_millis.started_at = DateTime::from_timestamp_millis(1_795_831_200).unwrap();
        assert!(build_attempt(seconds_as_millis).unwrap_err().starts_with("field `started_at`: 1970-01-21"));
        let mut far = fields();
        far.started_at = DateTime::from_timestamp_millis(4_102_444_800_000).unwrap();
        assert!(build_attempt(far).is_err(), "2100-01-01 is past the range");
    }

    #[test]
    fn explicit_error_class_wins_over_derivation() {
        let mut f = fields();
        f.http_status = Some(429);
        f.error_class = Some(ErrorClass::Transient);
        assert_eq!(build_attempt(f).unwrap().attempt.error_class, Some(ErrorClass::Transient));
    }

    #[test]
    fn the_received_provider_is_kept_and_served_defaults_to_requested() {
        let a = build_attempt(fields()).unwrap().attempt;
        assert_eq!((a.provider.as_str(), a.served_provider.as_str()), ("OpenAI", "OpenAI"));
    }

    #[test]
    fn the_derived_id_hashes_the_provider_spelling_lower_cased() {
        let mut f = fields();
        f.provider = " OPENAI ".into();
        let upper = build_attempt(f).unwrap().attempt.attempt_id;
        assert_eq!(upper, build_attempt(fields()).unwrap().attempt.attempt_id);
    }

    #[test]
    fn cached_tokens_above_input_are_read_as_counted_apart_with_a_warning() {
        let mut f = fields();
        f.tokens = Tokens {
            input: Some(10),
            cached_input: Some(11),
            cache_write_input: Some(4),
            ..Tokens::default()
        };
        let built = build_attempt(f).unwrap();
        assert_eq!(built.attempt.tokens.input, Some(25));
        assert_eq!(built.warnings.len(), 1);
        assert!(built.warnings[0].contains("input_tokens raised to 25"), "{:?}", built.warnings);
    }

    #[test]
    fn reasoning_tokens_are_part_of_output_or_counted_apart_with_a_warning() {
        for (output, reasoning, stored, warned) in [
            (Some(30), 12, 30, false),
            (Some(12), 12, 12, false),
            (Some(10), 25, 35, true),
            (None, 5, 5, true),
        ] {
            let mut f = fields();
            f.tokens = Tokens { output, reasoning_output: Some(reasoning), ..Tokens::default() };
            let built = build_attempt(f).unwrap();
            assert_eq!(built.attempt.tokens.output, Some(stored), "{output:?} {reasoning}");
            assert_eq!(built.attempt.tokens.reasoning_output, Some(reasoning));
            assert_eq!(built.warnings.len(), usize::from(warned), "{:?}", built.warnings);
        }
    }

    #[test]
    fn one_hour_cache_writes_are_part_of_the_cache_writes() {
        for (all, one_hour, stored, warned) in [
            (Some(100), 40, 100, false),
            (Some(40), 40, 40, false),
            (Some(30), 50, 80, true),
            (None, 25, 25, false),
        ] {
            let mut f = fields();
            f.tokens = Tokens {
                input: Some(500),
                cache_write_input: all,
                cache_write_1h_input: Some(one_hour),
                ..Tokens::default()
            };
            let built = build_attempt(f).unwrap();
            assert_eq!(built.attempt.tokens.cache_write_input, Some(stored), "{all:?} {one_hour}");
            assert_eq!(built.warnings.len(), usize::from(warned), "{:?}", built.warnings);
        }
    }

    #[test]
    fn a_total_settles_whether_thoughts_were_counted_in_the_output() {
        // Gemini: 20 candidates and 15 thoughts; some emitters add them up.
        for (total, output, warned) in
            [(Some(135), 35, true), (Some(120), 20, false), (Some(999), 20, false), (None, 20, false)]
        {
            let mut f = fields();
            f.tokens = Tokens {
                input: Some(100),
                output: Some(20),
                reasoning_output: Some(15),
                ..Tokens::default()
            };
            f.total_tokens = total;
            let built = build_attempt(f).unwrap();
            assert_eq!(built.attempt.tokens.output, Some(output), "{total:?}");
            assert_eq!(built.warnings.len(), usize::from(warned), "{:?}", built.warnings);
        }
    }

    #[test]
    fn pricing_fields_change_the_fingerprint_only_when_present() {
        let plain = build_attempt(fields()).unwrap().attempt;
        for change in [
            (|f: &mut AttemptFields| f.batch = Some(true)) as fn(&mut AttemptFields),
            |f| f.web_search_requests = Some(2),
            |f| f.tokens.cache_write_1h_input = Some(1),
        ] {
            let mut f = fields();
            change(&mut f);
            assert_ne!(build_attempt(f).unwrap().attempt.fingerprint, plain.fingerprint);
        }
    }

    #[test]
    fn derived_id_depends_on_every_identifying_field() {
        let t = DateTime::from_timestamp_millis(1_767_225_600_000).unwrap();
        let base = derived_attempt_id("w", Some(0), t, Layer::App, "openai", "m");
        let variants = [
            derived_attempt_id("w2", Some(0), t, Layer::App, "openai", "m"),
            derived_attempt_id("w", Some(1), t, Layer::App, "openai", "m"),
            derived_attempt_id("w", None, t, Layer::App, "openai", "m"),
            derived_attempt_id(
                "w",
                Some(0),
                t + chrono::Duration::milliseconds(1),
                Layer::App,
                "openai",
                "m",
            ),
            derived_attempt_id("w", Some(0), t, Layer::Sdk, "openai", "m"),
            derived_attempt_id("w", Some(0), t, Layer::App, "anthropic", "m"),
            derived_attempt_id("w", Some(0), t, Layer::App, "openai", "m2"),
        ];
        for v in variants {
            assert_ne!(base, v);
        }
    }
}
