//! Every record a body holds is judged on its own, and an ingest answer adds
//! up: `accepted + duplicates + conflicts + rejected_total = received`, for
//! every framing (lines, a JSON array, one record), every declared type and
//! every format, over HTTP, from files and from standard input.

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};

use attempt_core::ingest::format::Format;
use attempt_core::ingest::framing::{Framing, decode_body};
use attempt_ledger::store::{Batch, Store};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::rec;
use crate::service::Service;

const BIN: &str = env!("CARGO_BIN_EXE_attempt-ledger");

/// One item of a generated body.
#[derive(Debug, Clone)]
enum Item {
    /// A record of the body's format: `key` names it (its id), `variant`
    /// its content (the same key with another variant is a conflict), and
    /// for OpenRouter and OTLP `width` is how many records it holds
    /// (upstream tries, or model-call spans).
    Good {
        key: u8,
        variant: u8,
        width: u8,
    },
    /// A record no decoder keeps: `kind` picks not-JSON, an array, a bare
    /// number, or an object without the required fields.
    Bad {
        kind: u8,
    },
    Blank,
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        6 => (0u8..12, 0u8..2, 1u8..4).prop_map(|(key, variant, width)| Item::Good { key, variant, width }),
        2 => (0u8..4).prop_map(|kind| Item::Bad { kind }),
        1 => Just(Item::Blank),
    ]
}

/// The text of a good record of `format`.
fn good_record(format: Format, key: u8, variant: u8, width: u8) -> String {
    let tokens = 100 + u64::from(variant);
    match format {
        Format::Attempts => rec(json!({"attempt_id": format!("a{key}"), "workflow_id": format!("w{key}"),
            "input_tokens": tokens})),
        Format::Litellm => json!({
            "id": format!("c{key}"), "litellm_call_id": format!("c{key}"), "trace_id": format!("t{key}"),
            "call_type": "acompletion", "status": "success", "custom_llm_provider": "openai",
            "model": "gpt-4o", "startTime": 1_795_831_200.25, "endTime": 1_795_831_201.0,
            "prompt_tokens": tokens, "completion_tokens": 20
        })
        .to_string(),
        Format::Openrouter => {
            let responses: Vec<Value> = (0..width)
                .map(|i| {
                    let last = i + 1 == width;
                    json!({"provider_name": if last { "OpenAI" } else { "Azure" },
                           "status": if last { 200 } else { 429 }, "latency": 300})
                })
                .collect();
            json!({"data": {"id": format!("gen-{key}"), "created_at": "2026-11-28T02:00:00Z",
                "model": "openai/gpt-4o", "provider_name": "OpenAI", "native_tokens_prompt": tokens,
                "native_tokens_completion": 10, "provider_responses": responses}})
            .to_string()
        }
        Format::Otlp => {
            // `width` model-call spans of trace `key`; a span's content is not
            // compared on redelivery, so `variant` only moves its tokens.
            let spans: Vec<Value> = (0..width)
                .map(|i| {
                    json!({"traceId": format!("{:032x}", u128::from(key) + 1), "spanId": format!("{:016x}", u64::from(i) + 1),
                        "name": "chat", "kind": 3,
                        "startTimeUnixNano": (1_795_831_200_000_000_000u64 + u64::from(i) * 1_000_000_000).to_string(),
                        "endTimeUnixNano": (1_795_831_200_500_000_000u64 + u64::from(i) * 1_000_000_000).to_string(),
                        "attributes": [
                            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                            {"key": "gen_ai.provider.name", "value": {"stringValue": "openai"}},
                            {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}},
                            {"key": "gen_ai.usage.input_tokens", "value": {"intValue": tokens.to_string()}}
                        ]})
                })
                .collect();
            json!({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).to_string()
        }
    }
}

fn bad_record(kind: u8, in_array: bool) -> String {
    match kind % 4 {
        0 if !in_array => "not json".to_string(),
        0 | 1 => "[1, 2]".to_string(),
        2 => "7".to_string(),
        _ => "{\"workflow_id\": \"nothing else\"}".to_string(),
    }
}

/// What a store that saw everything before answers for each record: a
/// model of the write's bookkeeping, by record id and content.
#[derive(Default)]
struct Seen(HashMap<String, u8>);

#[derive(Debug, Default, PartialEq, Eq)]
struct Expected {
    received: u64,
    accepted: u64,
    duplicates: u64,
    conflicts: u64,
    rejected: u64,
}

impl Seen {
    /// The records a good item holds: each one's id and content. An
    /// OpenRouter generation's tokens belong to its last (serving) try, so
    /// the other tries' content is the same whatever the variant.
    fn records(format: Format, key: u8, variant: u8, width: u8) -> Vec<(String, u8)> {
        match format {
            Format::Attempts | Format::Litellm => vec![(format!("{key}"), variant)],
            Format::Openrouter => (0..width)
                .map(|i| (format!("{key}/{i}"), if i + 1 == width { variant + 1 } else { 0 }))
                .collect(),
            Format::Otlp => (0..width).map(|i| (format!("{key}/{i}"), variant)).collect(),
        }
    }

    fn expect(&mut self, format: Format, items: &[&Item], out: &mut Expected) {
        for item in items {
            match item {
                Item::Blank => {}
                Item::Bad { .. } => {
                    out.received += 1;
                    out.rejected += 1;
                }
                Item::Good { key, variant, width } => {
                    for (id, content) in Self::records(format, *key, *variant, *width) {
                        out.received += 1;
                        match self.0.get(&id) {
                            None => {
                                out.accepted += 1;
                                self.0.insert(id, content);
                            }
                            // Spans are redelivered by id: content is not compared.
                            Some(_) if format == Format::Otlp => out.duplicates += 1,
                            Some(first) if *first == content => out.duplicates += 1,
                            Some(_) => out.conflicts += 1,
                        }
                    }
                }
            }
        }
    }
}

/// A body of `items` in `format`, as lines or (`array`) one JSON array.
fn body(format: Format, items: &[&Item], array: bool) -> String {
    let records: Vec<String> = items
        .iter()
        .filter_map(|item| match item {
            Item::Good { key, variant, width } => Some(good_record(format, *key, *variant, *width)),
            Item::Bad { kind } => Some(bad_record(*kind, array)),
            Item::Blank => (!array).then(String::new),
        })
        .collect();
    if array { format!("[{}]", records.join(",\n")) } else { records.join("\n") }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random bodies of every format, framed as lines or as one array and
    /// declared as lines or as a document, written one after the other into
    /// one store: each answer's counts are what a model of the store says,
    /// and they add up to the records the body held.
    #[test]
    fn every_record_received_is_accepted_a_duplicate_a_conflict_or_rejected(
        bodies in prop::collection::vec(
            (0usize..4, any::<bool>(), any::<bool>(), any::<bool>(), prop::collection::vec(item(), 0..14)),
            1..6,
        ),
    ) {
        let store = Store::open_in_memory().unwrap();
        let mut seen: HashMap<usize, Seen> = HashMap::new();
        for (format_at, as_array, declared_lines, named, items) in bodies {
            let format = [Format::Attempts, Format::Litellm, Format::Openrouter, Format::Otlp][format_at];
            let items: Vec<&Item> = items.iter().collect();
            // A first item that is bad cannot tell the format: name it then.
            let named = named || !matches!(items.iter().find(|i| !matches!(i, Item::Blank)), Some(Item::Good { .. }));
            let text = body(format, &items, as_array);
            let framing = if declared_lines { Framing::Lines } else { Framing::Document };
            let decoded = decode_body(&text, framing, named.then_some(format)).unwrap();
            let stats = store
                .write_batches(&[Batch { attempts: &decoded.attempts, spans: &decoded.spans, circuits: &decoded.circuits }])
                .unwrap()
                .pop()
                .unwrap();
            let got = Expected {
                received: decoded.received(),
                accepted: stats.inserted,
                duplicates: stats.duplicates,
                conflicts: stats.conflicts,
                rejected: decoded.rejected + stats.records_refused,
            };
            prop_assert_eq!(
                got.accepted + got.duplicates + got.conflicts + got.rejected,
                got.received,
                "the answer adds up"
            );
            // An array declared as lines is lines: each of its lines is a record.
            if as_array && declared_lines {
                let lines = text.lines().filter(|l| !l.trim().is_empty()).count() as u64;
                if format == Format::Attempts || format == Format::Litellm {
                    prop_assert_eq!(got.received, lines);
                }
                continue;
            }
            let mut want = Expected::default();
            // A lone bad line that is itself a JSON array is, declared as a
            // document, that array: each of its elements a bad record.
            let lone_array = match (declared_lines, &text.lines().filter(|l| !l.trim().is_empty()).collect::<Vec<_>>()[..]) {
                (false, [line]) => serde_json::from_str::<Vec<Value>>(line).ok().map(|a| a.len() as u64),
                _ => None,
            };
            if let (Some(elements), [Item::Bad { .. }]) = (lone_array, &items.iter().filter(|i| !matches!(i, Item::Blank)).copied().collect::<Vec<_>>()[..]) {
                want.received = elements;
                want.rejected = elements;
                prop_assert_eq!(got, want);
                continue;
            }
            seen.entry(format_at).or_default().expect(format, &items, &mut want);
            prop_assert_eq!(got, want, "{:?} {:?} array {}:\n{}", format, framing, as_array, text);
        }
    }
}

fn answer_of(service: &Service, path: &str, content_type: &str, body: &str) -> Value {
    let (status, answer, _) = service.post(path, content_type, None, body.as_bytes());
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    serde_json::from_slice(&answer).unwrap()
}

fn counts(answer: &Value) -> (u64, u64, u64, u64, u64) {
    let n = |k: &str| answer[k].as_u64().unwrap_or_else(|| panic!("{k} in {answer}"));
    (n("received"), n("accepted"), n("duplicates"), n("conflicts"), n("rejected_total"))
}

/// The case: 400 JSON lines whose first line is an array (a bad
/// record). Declared as lines, or as `application/json` (the body does not
/// parse as one document), the 399 good lines are stored and line 1 is
/// named; the same lines through `ingest`, from a file and from stdin, give
/// the same counts.
#[test]
fn a_first_line_that_is_an_array_is_one_bad_record_in_every_framing_and_path() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = std::iter::once("[{\"workflow_id\": \"x\"}, 2]".to_string())
        .chain((0..399).map(|i| rec(json!({"workflow_id": format!("w{i}"), "attempt_id": format!("a{i}")}))))
        .collect();
    let body = lines.join("\n") + "\n";
    let service = Service::start(&dir.path().join("s.duckdb"), &[]);
    for (i, content_type) in
        ["application/x-ndjson", "application/jsonl", "application/json", "application/json; charset=utf-8"]
            .iter()
            .enumerate()
    {
        let answer = answer_of(&service, "/v1/attempts", content_type, &body);
        let accepted = if i == 0 { 399 } else { 0 };
        assert_eq!(counts(&answer), (400, accepted, 399 - accepted, 0, 1), "{content_type}: {answer}");
        assert_eq!(answer["rejected"][0]["line"], 1, "{answer}");
        assert!(
            answer["rejected"][0]["reason"]
                .as_str()
                .unwrap()
                .contains("expected a JSON object, got an array"),
            "{answer}"
        );
    }
    assert_eq!(service.report("")["attempts"]["total"], 399);
    // LiteLLM's route, NDJSON whose first line is an array: the same.
    let payloads: Vec<String> = std::iter::once("[1]".to_string())
        .chain((0..3).map(|key| good_record(Format::Litellm, key, 0, 1)))
        .collect();
    let answer = answer_of(&service, "/v1/litellm", "application/x-ndjson", &payloads.join("\n"));
    assert_eq!(counts(&answer), (4, 3, 0, 0, 1), "{answer}");

    // A JSON array declared as JSON lines is lines: each line is judged.
    let array = format!("[{},\n{}]", rec(json!({"attempt_id": "b1"})), rec(json!({"attempt_id": "b2"})));
    let answer = answer_of(&service, "/v1/attempts", "application/x-ndjson", &array);
    assert_eq!(counts(&answer), (2, 0, 0, 0, 2), "{answer}");
    // Declared as JSON, the same array is two records.
    let answer = answer_of(&service, "/v1/attempts", "application/json", &array);
    assert_eq!(counts(&answer), (2, 2, 0, 0, 0), "{answer}");
    // One record over several lines, declared as JSON.
    let pretty = serde_json::to_string_pretty(
        &serde_json::from_str::<Value>(&rec(json!({"attempt_id": "b3"}))).unwrap(),
    )
    .unwrap();
    let answer = answer_of(&service, "/v1/attempts", "application/json", &pretty);
    assert_eq!(counts(&answer), (1, 1, 0, 0, 0), "{answer}");
    service.stop();

    // Files and standard input, into a fresh database each.
    let file = dir.path().join("lines.jsonl");
    std::fs::write(&file, &body).unwrap();
    let summary = |out: std::process::Output| {
        assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let want = "accepted 399 records, 0 duplicates of records already stored, 0 conflicts, 0 warnings, \
                1 rejected (of 400 received)\n";
    let from_file = Command::new(BIN)
        .args(["ingest", "--db", dir.path().join("f.duckdb").to_str().unwrap(), file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(summary(from_file), want);
    let mut child = Command::new(BIN)
        .args(["ingest", "--db", dir.path().join("i.duckdb").to_str().unwrap(), "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    assert_eq!(summary(child.wait_with_output().unwrap()), want);
}

/// A file (or standard input) that is one JSON array of records, compact or
/// pretty-printed, is read as one: each element a record, numbered by its
/// index; LiteLLM's payloads the same way.
#[test]
fn a_file_that_is_one_json_array_is_read_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Value> = (0..5)
        .map(|i| {
            serde_json::from_str(&rec(json!({"workflow_id": format!("w{i}"), "attempt_id": format!("a{i}")})))
                .unwrap()
        })
        .chain([json!(7)])
        .collect();
    for (name, text) in [
        ("compact.json", serde_json::to_string(&records).unwrap()),
        ("pretty.json", serde_json::to_string_pretty(&records).unwrap()),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, &text).unwrap();
        let db = dir.path().join(format!("{name}.duckdb"));
        let out = Command::new(BIN)
            .args(["ingest", "--db", db.to_str().unwrap(), file.to_str().unwrap()])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stdout.starts_with("accepted 5 records,") && stdout.contains("1 rejected (of 6 received)"),
            "{name}: {stdout}"
        );
        assert!(
            stderr.contains(&format!("rejected {}:6: expected a JSON object, got a number", file.display())),
            "{stderr}"
        );
    }
}
