//! JSONL attempt records (docs/record-format.md, "Fields") to domain `Attempt`s;
//! a line of `"type": "circuit"` is a breaker state change (`circuit.rs`).
//!
//! Decoding never fails a whole input: each line is either an attempt or a
//! rejection naming the field and what was wrong with it.
//!
//! A line is read without a JSON DOM: one pass over its text keeps each
//! known field as a scalar that borrows from the line (`Scalar`), and each
//! unknown field as its raw text, so a bulk import spends its time on the
//! record, not on allocating a tree for it. Bodies sent as a JSON array, and
//! any line the fast path cannot read, go through `serde_json::Value`; both
//! end in the same `Fields::validate`, so the rules and messages are one.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::{AttemptFields, Built, Decoded, build_attempt};
use crate::model::{PicoUsd, Status, Tokens};
use crate::ratelimit;

/// Decodes JSONL attempt records. Blank lines are skipped; `first_line`
/// numbers the lines of a chunk that started mid-file.
pub fn decode_lines(body: &str, first_line: u64) -> Decoded {
    let mut decoded = Decoded::default();
    for (index, line) in body.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let number = first_line + index as u64;
        if super::circuit::is_circuit_line(line) {
            decoded.push_circuit(number, super::circuit::decode_line(line));
        } else {
            decoded.push_built(number, decode_record(line));
        }
    }
    decoded
}

/// Decodes one non-blank line (warnings dropped: for tests and tools).
pub fn decode_line(line: &str) -> Result<crate::model::Attempt, String> {
    decode_record(line).map(|built| built.attempt)
}

/// Decodes one record (a line, or an element of an array).
pub fn decode_record(line: &str) -> Result<Built, String> {
    match serde_json::from_str::<Fields>(line) {
        Ok(fields) => fields.validate(),
        // Not an object, or not JSON: the DOM's reading says which, in the
        // words it always used.
        Err(_) => {
            let value: Value = serde_json::from_str(line).map_err(|err| format!("not valid JSON: {err}"))?;
            decode_value(value)
        }
    }
}

/// One line through the DOM path only: what the borrowing path must equal
/// (the fuzz target `attempts_jsonl` holds them to it).
#[doc(hidden)]
pub fn decode_line_through_dom(line: &str) -> Result<Built, String> {
    let value: Value = serde_json::from_str(line).map_err(|err| format!("not valid JSON: {err}"))?;
    decode_value(value)
}

/// One parsed attempt record.
pub fn decode_value(value: Value) -> Result<Built, String> {
    let Value::Object(map) = value else {
        return Err(format!("expected a JSON object, got {}", kind(&value)));
    };
    Fields::of_map(&map).validate()
}

/// The fields every attempt record may carry, in the order they are checked
/// (the first that is wrong is the one a rejection names; `http_status` is
/// read first).
const KNOWN: [&str; 47] = [
    "http_status",
    "workflow_id",
    "started_at",
    "provider",
    "model",
    "status",
    "attempt_id",
    "attempt",
    "workflow",
    "layer",
    "route",
    "route_group",
    "served_provider",
    "served_model",
    "provider_request_id",
    "billing_account",
    "service_tier",
    "batch",
    "duration_ms",
    "ttft_ms",
    "error_class",
    "error_code",
    "retry_after_ms",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "cache_write_input_tokens",
    "reasoning_output_tokens",
    "cache_write_1h_input_tokens",
    "web_search_requests",
    "cost_usd",
    "commit_state",
    "visible_output",
    "decision",
    "circuit",
    "ratelimit_remaining_requests",
    "ratelimit_limit_requests",
    "ratelimit_reset_requests_ms",
    "ratelimit_remaining_tokens",
    "ratelimit_limit_tokens",
    "ratelimit_reset_tokens_ms",
    "ratelimit_remaining_input_tokens",
    "ratelimit_limit_input_tokens",
    "ratelimit_reset_input_tokens_ms",
    "ratelimit_remaining_output_tokens",
    "ratelimit_limit_output_tokens",
    "ratelimit_reset_output_tokens_ms",
];

/// The position of `key` in `KNOWN`: only keys of its length are compared
/// (a record has about twenty keys, and a linear search of 29 names for each
/// showed in the profile of a bulk import).
fn known_index(key: &str) -> Option<usize> {
    static BY_LENGTH: std::sync::LazyLock<Vec<Vec<(usize, &'static str)>>> = std::sync::LazyLock::new(|| {
        let mut table = vec![Vec::new(); KNOWN.iter().map(|k| k.len()).max().unwrap_or(0) + 1];
        for (at, name) in KNOWN.iter().enumerate() {
            table[name.len()].push((at, *name));
        }
        table
    });
    BY_LENGTH.get(key.len())?.iter().find(|(_, name)| *name == key).map(|(at, _)| *at)
}

/// A field's JSON value, as far as the rules read it: strings borrowed from
/// the line where they have no escapes, containers only by kind.
#[derive(Debug, Clone)]
enum Scalar<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(Cow<'a, str>),
    Array,
    Object,
}

impl<'a> Scalar<'a> {
    fn of_value(value: &'a Value) -> Self {
        match value {
            Value::Null => Scalar::Null,
            Value::Bool(b) => Scalar::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Scalar::Int(i),
                (None, Some(u)) => Scalar::Uint(u),
                _ => Scalar::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => Scalar::Str(Cow::Borrowed(s)),
            Value::Array(_) => Scalar::Array,
            Value::Object(_) => Scalar::Object,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Scalar::Null => "null",
            Scalar::Bool(_) => "a boolean",
            Scalar::Int(_) | Scalar::Uint(_) | Scalar::Float(_) => "a number",
            Scalar::Str(_) => "a string",
            Scalar::Array => "an array",
            Scalar::Object => "an object",
        }
    }

    fn as_i64(&self) -> Option<i64> {
        match self {
            Scalar::Int(i) => Some(*i),
            _ => None,
        }
    }

    fn as_f64(&self) -> Option<f64> {
        match self {
            Scalar::Int(i) => Some(*i as f64),
            Scalar::Uint(u) => Some(*u as f64),
            Scalar::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// A number as JSON spells it, anything else by its kind, so "got 1.5"
    /// says what is wrong with it.
    fn describe(&self) -> String {
        match self {
            Scalar::Int(i) => i.to_string(),
            Scalar::Uint(u) => u.to_string(),
            Scalar::Float(f) => {
                serde_json::Number::from_f64(*f).map_or_else(|| f.to_string(), |n| n.to_string())
            }
            other => other.kind().to_string(),
        }
    }
}

impl<'de> Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ScalarVisitor;
        impl<'de> Visitor<'de> for ScalarVisitor {
            type Value = Scalar<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Null)
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
                Ok(Scalar::Bool(b))
            }
            fn visit_i64<E>(self, i: i64) -> Result<Self::Value, E> {
                Ok(Scalar::Int(i))
            }
            fn visit_u64<E>(self, u: u64) -> Result<Self::Value, E> {
                Ok(i64::try_from(u).map_or(Scalar::Uint(u), Scalar::Int))
            }
            fn visit_f64<E>(self, f: f64) -> Result<Self::Value, E> {
                Ok(Scalar::Float(f))
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Owned(s.to_string())))
            }
            fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Owned(s)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar::Array)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar::Object)
            }
        }
        deserializer.deserialize_any(ScalarVisitor)
    }
}

/// A key, borrowed from the line where it has no escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(s.to_string())))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// An unknown field's value: its raw text (the fast path) or the parsed
/// value (the DOM path).
enum Unknown<'a> {
    Raw(&'a RawValue),
    Parsed(&'a Value),
}

/// One record's fields: the known ones by `KNOWN` position (a repeated key:
/// the last wins, as in a JSON object), the rest as they came.
struct Fields<'a> {
    known: [Option<Scalar<'a>>; KNOWN.len()],
    /// The next known field `validate` reads: it reads them in `KNOWN`'s
    /// order.
    next: usize,
    unknown: Vec<(Cow<'a, str>, Unknown<'a>)>,
    warnings: Vec<String>,
}

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;
        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut fields = Fields::empty();
                while let Some(Key(key)) = map.next_key::<Key>()? {
                    match known_index(&key) {
                        Some(at) => fields.known[at] = Some(map.next_value::<Scalar>()?),
                        None => {
                            let raw: &RawValue = map.next_value()?;
                            fields.unknown.retain(|(k, _)| *k != key);
                            fields.unknown.push((key, Unknown::Raw(raw)));
                        }
                    }
                }
                Ok(fields)
            }
        }
        deserializer.deserialize_map(FieldsVisitor)
    }
}

impl<'a> Fields<'a> {
    fn empty() -> Self {
        Fields { known: std::array::from_fn(|_| None), next: 0, unknown: Vec::new(), warnings: Vec::new() }
    }

    fn of_map(map: &'a Map<String, Value>) -> Self {
        let mut fields = Fields::empty();
        for (key, value) in map {
            match known_index(key) {
                Some(at) => fields.known[at] = Some(Scalar::of_value(value)),
                None => fields.unknown.push((Cow::Borrowed(key), Unknown::Parsed(value))),
            }
        }
        fields
    }

    /// The next field in `KNOWN`'s order, which must be `field`. `null` and
    /// `""` are absent: many emitters write every key, some with an empty
    /// string for "none".
    fn take(&mut self, field: &str) -> Option<Scalar<'a>> {
        let at = self.next;
        assert_eq!(KNOWN.get(at), Some(&field), "validate reads the fields in KNOWN's order");
        self.next += 1;
        self.known[at].take().filter(|value| match value {
            Scalar::Null => false,
            Scalar::Str(s) => !s.trim().is_empty(),
            _ => true,
        })
    }

    /// Some clients log 0 (or -1) for "no response": that is no status, not
    /// a bad record.
    fn http_status(&mut self) -> Result<Option<i32>, String> {
        match self.optional("http_status", integer)? {
            Some(code @ 100..=599) => Ok(Some(code as i32)),
            Some(code) => {
                self.warnings
                    .push(format!("field `http_status`: {code} is not an HTTP status (100-599), dropped"));
                Ok(None)
            }
            None => Ok(None),
        }
    }

    fn required<T>(
        &mut self,
        field: &str,
        parse: impl FnOnce(&Scalar) -> Result<T, String>,
    ) -> Result<T, String> {
        let value = self.take(field).ok_or_else(|| format!("missing required field `{field}`"))?;
        parse(&value).map_err(|why| format!("field `{field}`: {why}"))
    }

    fn optional<T>(
        &mut self,
        field: &str,
        parse: impl FnOnce(&Scalar) -> Result<T, String>,
    ) -> Result<Option<T>, String> {
        self.take(field)
            .map(|value| parse(&value).map_err(|why| format!("field `{field}`: {why}")))
            .transpose()
    }

    fn required_string(&mut self, field: &str) -> Result<String, String> {
        self.required(field, non_empty_string)
    }

    fn string(&mut self, field: &str) -> Result<Option<String>, String> {
        self.optional(field, non_empty_string)
    }

    /// The record format's checks, field by field, then `build_attempt`.
    fn validate(mut self) -> Result<Built, String> {
        let http_status = self.http_status()?;
        let mut fields = AttemptFields {
            workflow_id: self.required_string("workflow_id")?,
            started_at: self.required("started_at", parse_started_at)?,
            provider: self.required_string("provider")?,
            model: self.required_string("model")?,
            status: Some(self.required("status", parse_enum::<Status>)?),
            attempt_id: self.string("attempt_id")?,
            attempt: self.optional("attempt", non_negative_integer)?,
            workflow: self.string("workflow")?,
            layer: self.optional("layer", parse_enum)?,
            route: self.optional("route", parse_enum)?,
            route_group: self.string("route_group")?,
            served_provider: self.string("served_provider")?,
            served_model: self.string("served_model")?,
            provider_request_id: self.string("provider_request_id")?,
            billing_account: self.string("billing_account")?,
            service_tier: self.string("service_tier")?,
            batch: self.optional("batch", boolean)?,
            duration_ms: self.optional("duration_ms", non_negative_number)?,
            ttft_ms: self.optional("ttft_ms", non_negative_number)?,
            http_status,
            error_class: self.optional("error_class", parse_enum)?,
            error_code: self.string("error_code")?,
            retry_after_ms: self.optional("retry_after_ms", non_negative_number)?,
            tokens: Tokens {
                input: self.optional("input_tokens", non_negative_integer)?,
                output: self.optional("output_tokens", non_negative_integer)?,
                cached_input: self.optional("cached_input_tokens", non_negative_integer)?,
                cache_write_input: self.optional("cache_write_input_tokens", non_negative_integer)?,
                reasoning_output: self.optional("reasoning_output_tokens", non_negative_integer)?,
                cache_write_1h_input: self.optional("cache_write_1h_input_tokens", non_negative_integer)?,
            },
            web_search_requests: self.optional("web_search_requests", non_negative_integer)?,
            cost: self.optional("cost_usd", cost_usd)?,
            commit_state: self.optional("commit_state", parse_enum)?,
            visible_output: self.optional("visible_output", boolean)?,
            decision: self.optional("decision", parse_enum)?,
            circuit: self.optional("circuit", parse_enum)?,
            ..AttemptFields::default()
        };
        for (name, kind, part) in ratelimit::FIELDS {
            let parse = if part == ratelimit::Part::ResetMs { reset_ms } else { non_negative_integer };
            fields.headroom.set(kind, part, self.optional(name, parse)?);
        }
        fields.extra = self.rest();
        fields.warnings = std::mem::take(&mut self.warnings);
        build_attempt(fields)
    }

    /// The unknown fields, as a JSON object (keys sorted, values as
    /// serde_json writes them): message text dropped, and the whole dropped
    /// (with a warning) past `MAX_EXTRA_BYTES`.
    fn rest(&mut self) -> Option<String> {
        let mut map = Map::new();
        for (key, value) in std::mem::take(&mut self.unknown) {
            if is_content_key(&key) {
                continue;
            }
            let value = match value {
                Unknown::Parsed(value) => value.clone(),
                Unknown::Raw(raw) => serde_json::from_str(raw.get()).unwrap_or(Value::Null),
            };
            map.insert(key.into_owned(), value);
        }
        if map.is_empty() {
            return None;
        }
        let text = Value::Object(map).to_string();
        if text.len() > MAX_EXTRA_BYTES {
            self.warnings.push(format!(
                "unknown fields take {} bytes, over the {MAX_EXTRA_BYTES}-byte limit: not kept",
                text.len()
            ));
            return None;
        }
        Some(text)
    }
}

/// Unknown fields are kept up to this size per record (as JSON text).
pub const MAX_EXTRA_BYTES: usize = 16 * 1024;

/// Prompt and completion text is never stored, whatever the emitter calls it.
fn is_content_key(key: &str) -> bool {
    const CONTENT: [&str; 10] = [
        "messages",
        "response",
        "prompt",
        "completion",
        "input",
        "output",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "input.value",
        "output.value",
    ];
    CONTENT.contains(&key) || key.starts_with("llm.input_messages") || key.starts_with("llm.output_messages")
}

fn kind(value: &Value) -> &'static str {
    Scalar::of_value(value).kind()
}

fn non_empty_string(value: &Scalar) -> Result<String, String> {
    match value {
        Scalar::Str(s) if !s.trim().is_empty() => Ok(s.to_string()),
        Scalar::Str(_) => Err("must not be empty".into()),
        other => Err(format!("expected a string, got {}", other.kind())),
    }
}

fn parse_enum<T: FromStr + strum::VariantNames>(value: &Scalar) -> Result<T, String> {
    let Scalar::Str(s) = value else {
        return Err(format!("expected a string, got {}", value.kind()));
    };
    T::from_str(s).map_err(|_| format!("`{s}` is not one of {}", T::VARIANTS.join(", ")))
}

fn non_negative_integer(value: &Scalar) -> Result<i64, String> {
    match value {
        Scalar::Int(n) if *n >= 0 => Ok(*n),
        Scalar::Int(n) => Err(format!("must be >= 0, got {n}")),
        Scalar::Uint(u) => Err(format!("{u} is out of range")),
        other => Err(format!("expected an integer >= 0, got {}", other.describe())),
    }
}

/// Milliseconds until a rate-limit window resets: at most a day.
fn reset_ms(value: &Scalar) -> Result<i64, String> {
    let ms = non_negative_integer(value)?;
    if ms > ratelimit::MAX_RESET_MS {
        return Err(format!("{ms} ms is more than a day ({} ms)", ratelimit::MAX_RESET_MS));
    }
    Ok(ms)
}

fn non_negative_number(value: &Scalar) -> Result<f64, String> {
    match value.as_f64() {
        Some(n) if n >= 0.0 && n.is_finite() => Ok(n),
        Some(n) => Err(format!("must be >= 0, got {n}")),
        None => Err(format!("expected a number, got {}", value.kind())),
    }
}

fn integer(value: &Scalar) -> Result<i64, String> {
    value.as_i64().ok_or_else(|| format!("expected an integer, got {}", value.describe()))
}

fn cost_usd(value: &Scalar) -> Result<PicoUsd, String> {
    let usd = value.as_f64().ok_or_else(|| format!("expected a number, got {}", value.kind()))?;
    PicoUsd::from_usd(usd).ok_or_else(|| format!("{usd} is not a cost in dollars (>= 0)"))
}

fn boolean(value: &Scalar) -> Result<bool, String> {
    match value {
        Scalar::Bool(b) => Ok(*b),
        other => Err(format!("expected true or false, got {}", other.kind())),
    }
}

/// RFC 3339 text or integer Unix milliseconds.
fn parse_started_at(value: &Scalar) -> Result<DateTime<Utc>, String> {
    match value {
        Scalar::Str(text) => DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|err| format!("`{text}` is not an RFC 3339 timestamp ({err})")),
        n @ (Scalar::Int(_) | Scalar::Uint(_) | Scalar::Float(_)) => n
            .as_i64()
            .and_then(DateTime::from_timestamp_millis)
            .ok_or_else(|| format!("{} is not integer Unix milliseconds", n.describe())),
        other => {
            Err(format!("expected an RFC 3339 string or integer Unix milliseconds, got {}", other.kind()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ErrorClass, Layer};

    const MINIMAL: &str = r#"{"workflow_id":"w1","started_at":"2026-01-01T00:00:00Z","provider":"openai","model":"gpt-4o","status":"ok"}"#;

    #[test]
    fn minimal_record_gets_the_spec_defaults() {
        let a = decode_line(MINIMAL).unwrap();
        assert_eq!(a.layer, Layer::App);
        assert_eq!(a.served_provider, "openai");
        assert_eq!(a.served_model, "gpt-4o");
        assert_eq!(a.error_class, None);
        assert_eq!(a.attempt_id.len(), 32);
        assert_eq!(a.extra, None);
    }

    #[test]
    fn headroom_fields_are_counts_kept_apart_from_absent() {
        use crate::ratelimit::{LimitKind, Window};
        let with =
            |fields: &str| MINIMAL.replace("\"status\":\"ok\"", &format!("\"status\":\"ok\",{fields}"));
        let a = decode_line(&with(
            r#""ratelimit_remaining_requests":0,"ratelimit_limit_requests":500,"ratelimit_reset_requests_ms":20,"ratelimit_limit_output_tokens":0"#,
        ))
        .unwrap();
        assert_eq!(
            *a.headroom.window(LimitKind::Requests),
            Window { remaining: Some(0), limit: Some(500), reset_ms: Some(20) }
        );
        assert_eq!(a.headroom.window(LimitKind::OutputTokens).ratio(), None, "a limit of 0 has no headroom");
        assert_eq!(a.headroom.window(LimitKind::Tokens).remaining, None);
        let plain = decode_line(MINIMAL).unwrap();
        assert_eq!(plain.fingerprint, 0x86c1_9682_8747_186f_u64, "no headroom hashes nothing");
        assert_ne!(a.fingerprint, plain.fingerprint);
        for (bad, field) in [
            (r#""ratelimit_remaining_tokens":-1"#, "ratelimit_remaining_tokens"),
            (r#""ratelimit_limit_input_tokens":"lots""#, "ratelimit_limit_input_tokens"),
            (r#""ratelimit_reset_tokens_ms":86400001"#, "ratelimit_reset_tokens_ms"),
        ] {
            let err = decode_line(&with(bad)).unwrap_err();
            assert!(err.contains(field), "{err}");
        }
    }

    #[test]
    fn billing_fields_are_optional_strings_that_keep_old_fingerprints() {
        let plain = decode_line(MINIMAL).unwrap();
        assert_eq!((plain.billing_account.as_deref(), plain.service_tier.as_deref()), (None, None));
        let billed = MINIMAL.replace(
            "\"status\":\"ok\"",
            "\"status\":\"ok\",\"billing_account\":\"proj_A\",\"service_tier\":\"flex\"",
        );
        let a = decode_line(&billed).unwrap();
        assert_eq!((a.billing_account.as_deref(), a.service_tier.as_deref()), (Some("proj_A"), Some("flex")));
        assert_ne!(a.fingerprint, plain.fingerprint, "a billed attempt differs from an unbilled one");
        // Stored before the fields existed: the same fingerprint as then.
        assert_eq!(plain.fingerprint, 0x86c1_9682_8747_186f_u64, "{:#x}", plain.fingerprint);
        let err = decode_line(&MINIMAL.replace("\"status\":\"ok\"", "\"status\":\"ok\",\"service_tier\":5"))
            .unwrap_err();
        assert!(err.contains("service_tier"), "{err}");
    }

    #[test]
    fn each_required_field_is_named_when_missing() {
        for field in ["workflow_id", "started_at", "provider", "model", "status"] {
            let mut map: Map<String, Value> = serde_json::from_str(MINIMAL).unwrap();
            map.remove(field);
            let err = decode_line(&Value::Object(map).to_string()).unwrap_err();
            assert_eq!(err, format!("missing required field `{field}`"));
        }
    }

    #[test]
    fn wrong_types_are_rejected_with_the_field_name() {
        let cases = [
            (r#""attempt":-1"#, "field `attempt`: must be >= 0, got -1"),
            (r#""attempt":1.5"#, "field `attempt`: expected an integer >= 0, got 1.5"),
            (r#""layer":"proxy""#, "field `layer`: `proxy` is not one of sdk, gateway, app, queue"),
            (r#""input_tokens":"12""#, "field `input_tokens`: expected an integer >= 0, got a string"),
            (r#""visible_output":1"#, "field `visible_output`: expected true or false, got a number"),
            (r#""http_status":"429""#, "field `http_status`: expected an integer, got a string"),
        ];
        for (extra, want) in cases {
            let line = MINIMAL.replace("\"status\":\"ok\"", &format!("\"status\":\"ok\",{extra}"));
            assert_eq!(decode_line(&line).unwrap_err(), want);
        }
    }

    #[test]
    fn started_at_accepts_rfc3339_and_unix_millis_as_the_same_instant() {
        let a = decode_line(MINIMAL).unwrap();
        let b = decode_line(&MINIMAL.replace(r#""2026-01-01T00:00:00Z""#, "1767225600000")).unwrap();
        let c = decode_line(&MINIMAL.replace("00:00:00Z", "01:00:00+01:00")).unwrap();
        assert_eq!(a.started_at, b.started_at);
        assert_eq!(a.attempt_id, b.attempt_id, "derived ids agree across spellings");
        assert_eq!(a.attempt_id, c.attempt_id);
        assert!(decode_line(&MINIMAL.replace(r#""2026-01-01T00:00:00Z""#, "1.5")).is_err());
    }

    #[test]
    fn unknown_fields_are_kept_and_nulls_are_absent() {
        let line = MINIMAL.replace("\"status\":\"ok\"", r#""status":"ok","team":"search","route":null"#);
        let a = decode_line(&line).unwrap();
        assert_eq!(a.extra.as_deref(), Some(r#"{"team":"search"}"#));
        assert_eq!(a.route, None);
    }

    #[test]
    fn lenient_values_are_corrected_with_a_warning_not_rejected() {
        let line = MINIMAL.replace(
            "\"status\":\"ok\"",
            r#""status":"error","http_status":0,"error_code":"","route_group":"","input_tokens":5,"cached_input_tokens":20"#,
        );
        let decoded = decode_lines(&line, 7);
        assert!(decoded.rejections.is_empty(), "{:?}", decoded.rejections);
        let a = &decoded.attempts[0];
        assert_eq!((a.http_status, a.error_code.as_deref(), a.route_group.as_deref()), (None, None, None));
        assert_eq!(a.tokens.input, Some(25), "input counted apart from cache reads is raised");
        let lines: Vec<u64> = decoded.warnings.iter().map(|w| w.line).collect();
        assert_eq!(lines, [7, 7], "{:?}", decoded.warnings);
        assert!(decoded.warnings[0].reason.contains("0 is not an HTTP status"));
    }

    #[test]
    fn route_group_and_cache_writes_are_read() {
        let line = MINIMAL.replace(
            "\"status\":\"ok\"",
            r#""status":"ok","route_group":"gpt-4o-pool","input_tokens":100,"cache_write_input_tokens":60"#,
        );
        let a = decode_line(&line).unwrap();
        assert_eq!(a.route_group.as_deref(), Some("gpt-4o-pool"));
        assert_eq!(a.tokens.cache_write_input, Some(60));
    }

    #[test]
    fn what_prices_an_attempt_is_read_and_checked() {
        let line = MINIMAL.replace(
            "\"status\":\"ok\"",
            r#""status":"ok","batch":true,"service_tier":"flex","input_tokens":500,"cache_write_input_tokens":300,
               "cache_write_1h_input_tokens":200,"web_search_requests":3"#,
        );
        let a = decode_line(&line.replace('\n', " ")).unwrap();
        assert_eq!(
            (a.batch, a.service_tier.as_deref(), a.web_search_requests),
            (Some(true), Some("flex"), Some(3))
        );
        assert_eq!((a.tokens.cache_write_input, a.tokens.cache_write_1h_input), (Some(300), Some(200)));
        let absent = decode_line(MINIMAL).unwrap();
        assert_eq!(
            (absent.batch, absent.web_search_requests, absent.tokens.cache_write_1h_input),
            (None, None, None)
        );
        for (field, why) in [
            (r#""batch":"yes""#, "field `batch`: expected true or false"),
            (r#""web_search_requests":-2"#, "field `web_search_requests`"),
            (r#""cache_write_1h_input_tokens":1.5"#, "field `cache_write_1h_input_tokens`"),
        ] {
            let err =
                decode_line(&MINIMAL.replace("\"status\":\"ok\"", &format!(r#""status":"ok",{field}"#)))
                    .unwrap_err();
            assert!(err.contains(why), "{field}: {err}");
        }
    }

    #[test]
    fn reasoning_tokens_are_read_and_checked() {
        let line = MINIMAL.replace(
            "\"status\":\"ok\"",
            r#""status":"ok","output_tokens":300,"reasoning_output_tokens":256"#,
        );
        assert_eq!(decode_line(&line).unwrap().tokens.reasoning_output, Some(256));
        let negative = MINIMAL.replace("\"status\":\"ok\"", r#""status":"ok","reasoning_output_tokens":-1"#);
        let err = decode_line(&negative).unwrap_err();
        assert!(err.contains("reasoning_output_tokens"), "{err}");
    }

    #[test]
    fn message_text_is_never_kept_and_extras_are_bounded() {
        let line = MINIMAL.replace(
            "\"status\":\"ok\"",
            r#""status":"ok","team":"search","messages":[{"role":"user","content":"secret"}],"response":"secret""#,
        );
        assert_eq!(decode_line(&line).unwrap().extra.as_deref(), Some(r#"{"team":"search"}"#));
        let big = MINIMAL
            .replace("\"status\":\"ok\"", &format!(r#""status":"ok","note":"{}""#, "x".repeat(20_000)));
        let decoded = decode_lines(&big, 1);
        assert_eq!(decoded.attempts[0].extra, None);
        assert!(decoded.warnings[0].reason.contains("16384-byte limit"), "{:?}", decoded.warnings);
    }

    #[test]
    fn failed_attempt_without_class_is_derived() {
        let line = MINIMAL.replace(
            "\"status\":\"ok\"",
            r#""status":"error","http_status":429,"error_code":"insufficient_quota""#,
        );
        assert_eq!(decode_line(&line).unwrap().error_class, Some(ErrorClass::Quota));
    }

    #[test]
    fn body_decoding_numbers_lines_and_skips_blanks() {
        let body = format!("{MINIMAL}\n\nnot json\n{MINIMAL}\n");
        let decoded = decode_lines(&body, 1);
        assert_eq!(decoded.attempts.len(), 2);
        assert_eq!(decoded.rejections.len(), 1);
        assert_eq!(decoded.rejections[0].line, 3);
        assert!(decoded.rejections[0].reason.starts_with("not valid JSON"));
    }

    /// The borrowing path reads every line as the DOM path does: the same
    /// attempt (extras in the same bytes, so fingerprints agree with rows
    /// stored before it existed), the same warnings, the same rejection.
    #[test]
    fn the_borrowing_decode_equals_the_dom_decode() {
        let lines = [
            MINIMAL.to_string(),
            MINIMAL.replace("\"w1\"", r#""w\u00e9\"1\n""#),
            MINIMAL.replace(
                r#""status":"ok""#,
                r#""status":"ok","z":1.0,"a":[1,{"b":null}],"m":1e300,"team":"x","team":"y""#,
            ),
            MINIMAL.replace(r#""status":"ok""#, r#""status":"ok","attempt":18446744073709551615"#),
            MINIMAL.replace(r#""status":"ok""#, r#""status":"ok","attempt":-3"#),
            MINIMAL.replace(r#""status":"ok""#, r#""status":"ok","input_tokens":12.5"#),
            MINIMAL
                .replace(r#""status":"ok""#, r#""status":"ok","http_status":0,"route":"","error_code":null"#),
            MINIMAL.replace(
                r#""status":"ok""#,
                r#""status":"ok","messages":[{"content":"secret"}],"visible_output":"yes""#,
            ),
            MINIMAL.replace(r#""status":"ok""#, r#""status":"error","status":"ok","cost_usd":-1"#),
            MINIMAL.replace(r#""2026-01-01T00:00:00Z""#, "1767225600000.5"),
            MINIMAL.replace(r#""provider":"openai""#, r#""provider":{"name":"openai"}"#),
            r#"[1,2]"#.to_string(),
            r#"{"workflow_id":"w1""#.to_string(),
            "7".to_string(),
        ];
        for line in &lines {
            let (fast, dom) = (decode_record(line), decode_line_through_dom(line));
            match (&fast, &dom) {
                (Ok(a), Ok(b)) => assert_eq!((&a.attempt, &a.warnings), (&b.attempt, &b.warnings), "{line}"),
                (Err(a), Err(b)) => assert_eq!(a, b, "{line}"),
                _ => panic!("{line}: {fast:?} against {dom:?}"),
            }
        }
    }
}
