//! One entry per fuzz target: what `fuzz/fuzz_targets/*.rs` run under
//! libFuzzer, and what `tests/fuzz_corpus.rs` replays from the committed
//! corpus on stable Rust in CI. Each entry must not panic on any input and
//! checks the invariants a caller relies on, so a fuzzer finds wrong
//! answers, not only crashes.

use std::io;

use chrono::{TimeZone, Utc};
use prost::Message;

use crate::alert_rules::RuleSet;
use crate::dimensions::{self, Dimension};
use crate::ingest::format::Format;
use crate::ingest::source::{MAX_LINE_BYTES, for_each_chunk};
use crate::ingest::{Decoded, MAX_KEPT_NOTES, otlp};
use crate::time_arg::parse_time;

/// A fuzz target: any bytes in, a panic on a broken invariant.
pub type Target = fn(&[u8]);

/// Every target, by the name of its corpus folder under `fuzz/corpus/`.
pub const TARGETS: &[(&str, Target)] = &[
    ("ingest_file", ingest_file),
    ("attempts_jsonl", attempts_jsonl),
    ("litellm_jsonl", litellm_jsonl),
    ("openrouter_jsonl", openrouter_jsonl),
    ("otlp_json", otlp_json),
    ("otlp_protobuf", otlp_protobuf),
    ("otlp_logs", otlp_logs),
    ("alert_rules", alert_rules),
    ("report_arguments", report_arguments),
    ("policy_file", policy_file),
    ("body_accounting", body_accounting),
];

/// A file as `ingest` reads it: split into chunks of whole lines (length
/// cap, UTF-8 check), its format told by the first line, then decoded.
pub fn ingest_file(data: &[u8]) {
    let mut format = None;
    let outcome = for_each_chunk::<io::Error>(data, 7, |chunk| {
        assert!(chunk.rejections.iter().all(|r| r.line >= chunk.first_line));
        let format = *format.get_or_insert_with(|| {
            let first = chunk.text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            Format::detect(first).unwrap_or(Format::Attempts)
        });
        let lines = chunk.text.lines().count() as u64;
        let decoded = format.decode_lines(&chunk.text, chunk.first_line);
        check_notes(&decoded);
        if format != Format::Otlp {
            // One line is one record, which may list several upstream tries.
            assert!(decoded.rejected <= lines, "{} rejections for {lines} lines", decoded.rejected);
        }
        Ok(())
    });
    outcome.expect("reading from memory cannot fail");
}

/// A request body, as `POST /v1/attempts` and `POST /v1/litellm` read it:
/// the first byte picks the declared framing and the format, the rest is
/// the body. Every record received is kept or rejected, once: for attempt
/// records and LiteLLM payloads, whose records are one attempt each, the
/// count is what the framing rule says the body holds, counted here
/// without any decoder (the non-blank lines, the array's elements, or one).
pub fn body_accounting(data: &[u8]) {
    use crate::ingest::framing::{Framing, check_accounting, decode_body};
    let Some((&pick, body)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(body) else { return };
    if text.lines().any(|l| l.len() > MAX_LINE_BYTES) {
        return;
    }
    let framing = if pick & 1 == 0 { Framing::Lines } else { Framing::Document };
    let format =
        [None, Some(Format::Attempts), Some(Format::Litellm), Some(Format::Openrouter), Some(Format::Otlp)]
            [usize::from(pick >> 1) % 5];
    let Ok(decoded) = decode_body(text, framing, format) else { return };
    check_notes(&decoded);
    if let Err(broken) = check_accounting(&decoded) {
        panic!("{broken}");
    }
    if matches!(format, Some(Format::Attempts | Format::Litellm)) {
        // "Parses as one" is JSON's syntax: a number past f64's range is
        // still one value (that record is rejected, not the body).
        use serde_json::value::RawValue;
        let lines = text.lines().filter(|l| !l.trim().is_empty()).count() as u64;
        let whole = match framing {
            Framing::Lines => None,
            Framing::Document => serde_json::from_str::<&RawValue>(text.trim()).ok(),
        };
        let expected = match whole {
            Some(value) if value.get().starts_with('[') => {
                serde_json::from_str::<Vec<&RawValue>>(value.get()).map_or(0, |v| v.len() as u64)
            }
            Some(_) => 1,
            None => lines,
        };
        assert_eq!(decoded.received(), expected, "{framing:?} {format:?}");
        assert_eq!(decoded.records, decoded.attempts.len() as u64);
    }
}

pub fn attempts_jsonl(data: &[u8]) {
    decode_as(Format::Attempts, data);
    // The borrowing decode reads each line as the DOM decode does.
    let Ok(text) = std::str::from_utf8(data) else { return };
    for line in text.lines().filter(|l| !l.trim().is_empty() && l.len() <= MAX_LINE_BYTES) {
        let fast = crate::ingest::jsonl::decode_lines(line, 1);
        let dom = crate::ingest::jsonl::decode_line_through_dom(line);
        match dom {
            Ok(built) => {
                assert_eq!(fast.attempts, vec![built.attempt], "{line}");
                let warnings: Vec<&str> = fast.warnings.iter().map(|w| w.reason.as_str()).collect();
                assert_eq!(warnings, built.warnings, "{line}");
            }
            Err(reason) => {
                assert_eq!(fast.rejections.first().map(|r| r.reason.as_str()), Some(reason.as_str()))
            }
        }
    }
}

pub fn litellm_jsonl(data: &[u8]) {
    decode_as(Format::Litellm, data);
}

pub fn openrouter_jsonl(data: &[u8]) {
    decode_as(Format::Openrouter, data);
}

pub fn otlp_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(spans) = otlp::decode_json(text) {
        check_spans(&spans.decoded);
    }
}

/// One protobuf request, decoded as the service does, a span at a time:
/// refused exactly when prost refuses the whole request, sorted exactly as
/// the whole request is, and never keeping more than the bound the
/// service takes from its byte budget before decoding.
pub fn otlp_protobuf(data: &[u8]) {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    let whole = ExportTraceServiceRequest::decode(data);
    let mut offered = 0;
    let by_span = otlp::decode_protobuf(data, &mut |n| {
        offered += n;
        true
    });
    let (request, spans) = match (whole, by_span) {
        (Ok(request), Ok(spans)) => (request, spans),
        (Err(_), Err(otlp::ProtobufError::Undecodable(_))) => return,
        (whole, by_span) => panic!("prost: {whole:?}, span by span: {by_span:?}"),
    };
    let tree = otlp::decode_request(&request);
    assert_eq!(spans.decoded.spans, tree.decoded.spans);
    assert_eq!(
        (&spans.decoded.rejections, &spans.decoded.warnings),
        (&tree.decoded.rejections, &tree.decoded.warnings)
    );
    let bound = otlp::kept_bytes_at_most(data).expect("it decoded");
    assert!(offered <= bound, "kept {offered} bytes, bound {bound}");
    check_spans(&spans.decoded);
    // What a trace derives from its stored spans, as after a restart.
    let _ = otlp::derive_trace(&spans.decoded.spans);
}

pub fn alert_rules(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(rules) = RuleSet::parse(text, "fuzz.toml") {
        // A rule set that parsed is usable: every rule names a kind and a
        // threshold that is a number.
        for rule in &rules.rules {
            assert!(rule.threshold.is_finite(), "rule {} has threshold {}", rule.name, rule.threshold);
        }
    }
}

/// A recovery policy file: what parses is what the audit can bind. Every
/// limit is in range, names are unique, and no value holds the separator
/// the store joins lists with.
pub fn policy_file(data: &[u8]) {
    use crate::policy::{LIST_SEPARATOR, Policy, PolicySet};
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(set) = PolicySet::parse(text, "fuzz.toml") else { return };
    let check = |policy: &Policy| {
        assert!(policy.max_total_attempts.is_none_or(|n| n >= 1));
        assert!(policy.max_elapsed_ms.is_none_or(|ms| ms.is_finite() && ms >= 0.0));
        assert!(policy.max_extra_cost_pusd.is_none_or(|p| p >= 0));
        assert!(policy.retry_budget.is_finite() && policy.retry_budget >= 0.0);
        assert!(i64::try_from(policy.retry_budget_floor).is_ok());
        for route in policy.approved_fallbacks.iter().flatten() {
            assert!(!route.contains(LIST_SEPARATOR) && !route.is_empty(), "{route:?}");
        }
    };
    check(&set.default);
    let mut names = std::collections::HashSet::new();
    for (name, policy) in &set.workflows {
        assert!(!name.contains(LIST_SEPARATOR) && names.insert(name), "{name:?}");
        check(policy);
    }
}

/// What a user types after `--since`/`--until` and `dimensions --set`.
pub fn report_arguments(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let now = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).single().expect("a valid instant");
    let _ = parse_time(text, now);
    let parsed: Vec<Dimension> = text.split('\n').filter_map(|line| line.parse().ok()).collect();
    if dimensions::check(&parsed).is_ok() {
        for dimension in &parsed {
            // What reaches SQL: a bare column, or a key inside one string
            // literal that nothing can close early.
            let sql = dimension.source.sql();
            let literal = sql.strip_prefix("extra_value(extra, '").and_then(|rest| rest.strip_suffix("')"));
            match literal {
                Some(key) => assert!(!key.contains('\'') && !key.contains('\\'), "{sql}"),
                None => assert!(
                    sql.strip_suffix("::VARCHAR")
                        .is_some_and(|c| c.chars().all(|c| c.is_ascii_lowercase() || c == '_')),
                    "{sql}"
                ),
            }
        }
    }
}

/// Decodes `data` as lines of `format` on one thread and on three: the same
/// records and notes either way (the parallel decode is a pure split).
fn decode_as(format: Format, data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if text.lines().any(|l| l.len() > MAX_LINE_BYTES) {
        return;
    }
    let one = format.decode_lines(text, 1);
    check_notes(&one);
    let three = format.decode_lines_parallel(text, 1, 3);
    assert_eq!(one.attempts, three.attempts);
    assert_eq!(one.rejections, three.rejections);
    assert_eq!((one.rejected, one.warned), (three.rejected, three.warned));
}

/// One protobuf logs request, decoded as the service does, a record at a
/// time: refused exactly when prost refuses the whole request, kept
/// exactly as the whole request is, every kept byte offered to the budget,
/// and every record counted once (kept, rejected or ignored).
pub fn otlp_logs(data: &[u8]) {
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    let whole = ExportLogsServiceRequest::decode(data);
    let mut offered = 0;
    let by_record = otlp::logs::decode_protobuf(data, &mut |n| {
        offered += n;
        true
    });
    let (request, logs) = match (whole, by_record) {
        (Ok(request), Ok(logs)) => (request, logs),
        (Err(_), Err(otlp::ProtobufError::Undecodable(_))) => return,
        (whole, by_record) => panic!("prost: {whole:?}, record by record: {by_record:?}"),
    };
    let tree = otlp::logs::decode_request(&request);
    assert_eq!(logs.decoded.spans, tree.decoded.spans);
    assert_eq!(logs.decoded.attempts, tree.decoded.attempts);
    assert_eq!(logs.decoded.circuits, tree.decoded.circuits);
    assert_eq!(offered, logs.held_bytes);
    let records: usize =
        request.resource_logs.iter().flat_map(|r| &r.scope_logs).map(|s| s.log_records.len()).sum();
    assert_eq!(logs.decoded.records + logs.decoded.rejected + logs.ignored, records as u64);
    check_spans(&logs.decoded);
    let _ = otlp::derive_trace(&logs.decoded.spans);
}

fn check_spans(decoded: &Decoded) {
    check_notes(decoded);
    // Ids of OTLP's lengths only, so no two pairs share an attempt id.
    for span in &decoded.spans {
        // An event's id is its span's and a hash of it (`otlp::logs`).
        let span_id = span.span_id.split('~').next().unwrap_or_default();
        assert_eq!((span.trace_id.len(), span_id.len()), (32, 16), "a span kept with odd ids");
        assert!(span.parent_span_id.as_ref().is_none_or(|p| p.len() == 16));
    }
    for attempt in &decoded.attempts {
        assert!(!attempt.attempt_id.is_empty() && !attempt.workflow_id.is_empty());
    }
}

fn check_notes(decoded: &Decoded) {
    assert!(decoded.rejections.len() <= MAX_KEPT_NOTES && decoded.warnings.len() <= MAX_KEPT_NOTES);
    assert!(decoded.rejected >= decoded.rejections.len() as u64);
    assert!(decoded.warned >= decoded.warnings.len() as u64);
    for attempt in &decoded.attempts {
        let tokens = &attempt.tokens;
        for count in
            [tokens.input, tokens.output, tokens.cached_input, tokens.cache_write_input].into_iter().flatten()
        {
            assert!(count >= 0, "a negative token count was accepted: {count}");
        }
        if let Some(cost) = attempt.cost {
            assert!(cost.0 >= 0, "a negative cost was accepted");
        }
    }
}
