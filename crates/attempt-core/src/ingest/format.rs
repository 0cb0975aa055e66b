//! Which wire format an input is in. Decided once per input, from the keys
//! of its first record, never guessed line by line: a record that merely
//! contains the text of another format's key is still what its input is.

use serde_json::{Map, Value};

use super::{Decoded, circuit, jsonl, litellm, openrouter, otlp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Format {
    /// Attempt records, one JSON object per line (docs/record-format.md).
    Attempts,
    /// OTLP trace exports in JSON, one `ExportTraceServiceRequest` per line
    /// (the OpenTelemetry Collector's file exporter).
    Otlp,
    /// LiteLLM's StandardLoggingPayload, one per line.
    Litellm,
    /// OpenRouter generation records, one per line.
    Openrouter,
}

impl Format {
    /// The format of an input whose first non-blank line is `first_line`.
    /// A first line that is not a JSON object decides nothing: the input is
    /// read as attempt records, and that line is rejected with its reason.
    pub fn detect(first_line: &str) -> Result<Format, String> {
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(first_line) else {
            return Ok(Format::Attempts);
        };
        let candidates: Vec<Format> = [
            (Format::Otlp, map.contains_key("resourceSpans") || map.contains_key("resource_spans")),
            (
                Format::Attempts,
                map.contains_key("workflow_id")
                    || map.contains_key("started_at")
                    || map.get("type").and_then(Value::as_str) == Some(circuit::RECORD_TYPE),
            ),
            (Format::Litellm, litellm::looks_like(&map)),
            (Format::Openrouter, openrouter::looks_like(&map)),
        ]
        .into_iter()
        .filter_map(|(format, matches)| matches.then_some(format))
        .collect();
        match candidates.as_slice() {
            [one] => Ok(*one),
            [] => Err(format!(
                "cannot tell the format from the first record (keys: {}); name it with --format \
                 attempts|otlp|litellm|openrouter (?format= over HTTP)",
                keys(&map)
            )),
            several => Err(format!(
                "the first record fits several formats ({}); name one with --format (?format= over HTTP)",
                several.iter().map(|f| <&str>::from(*f)).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// Decodes lines of this format; `first_line` numbers a chunk that
    /// started mid-input.
    pub fn decode_lines(self, text: &str, first_line: u64) -> Decoded {
        match self {
            Format::Attempts => jsonl::decode_lines(text, first_line),
            Format::Litellm => litellm::decode_lines(text, first_line),
            Format::Openrouter => openrouter::decode_lines(text, first_line),
            Format::Otlp => {
                let mut decoded = Decoded::default();
                for (index, line) in text.lines().enumerate() {
                    if !line.trim().is_empty() {
                        self.decode_record(line, first_line + index as u64, &mut decoded);
                    }
                }
                decoded
            }
        }
    }

    /// Decodes one record of this format (a line, an element of a JSON
    /// array, or a whole body) into `into`, its notes at `number`.
    pub fn decode_record(self, text: &str, number: u64, into: &mut Decoded) {
        match self {
            Format::Attempts if circuit::is_circuit_line(text) => {
                into.push_circuit(number, circuit::decode_line(text))
            }
            Format::Attempts => into.push_built(number, jsonl::decode_record(text)),
            Format::Litellm => {
                super::decode_json_record(text, number, |v| litellm::decode_value(v).map(|b| vec![b]), into)
            }
            Format::Openrouter => super::decode_json_record(text, number, openrouter::decode_value, into),
            Format::Otlp => match otlp::decode_json(text) {
                Ok(spans) => into.absorb_at(spans.decoded, number),
                Err(reason) => into.reject(number, reason),
            },
        }
    }
}

impl Format {
    /// `decode_lines` on up to `threads` threads, each a run of whole lines
    /// (every format decodes a line on its own); the result is the same,
    /// in input order.
    pub fn decode_lines_parallel(self, text: &str, first_line: u64, threads: usize) -> Decoded {
        let pieces = split_lines(text, first_line, threads);
        if pieces.len() <= 1 {
            return self.decode_lines(text, first_line);
        }
        let parts: Vec<Decoded> = std::thread::scope(|scope| {
            let handles: Vec<_> = pieces
                .iter()
                .map(|&(piece, line)| scope.spawn(move || self.decode_lines(piece, line)))
                .collect();
            // A decoder that panicked is a bug: the input is decoded again
            // on this thread, so the panic surfaces here with its message.
            handles
                .into_iter()
                .zip(&pieces)
                .map(|(handle, &(piece, line))| {
                    handle.join().unwrap_or_else(|_| self.decode_lines(piece, line))
                })
                .collect()
        });
        let mut decoded = Decoded::default();
        for part in parts {
            decoded.append(part);
        }
        decoded
    }
}

/// `text` cut into at most `parts` runs of whole lines of about the same
/// size, each with the number of its first line.
fn split_lines(text: &str, first_line: u64, parts: usize) -> Vec<(&str, u64)> {
    let mut pieces = Vec::new();
    let (mut rest, mut line) = (text, first_line);
    for left in (1..=parts.max(1)).rev() {
        if rest.is_empty() {
            break;
        }
        let target = rest.len() / left;
        let cut = if left == 1 {
            rest.len()
        } else {
            // Searched as bytes: `target` may fall inside a multi-byte
            // character, and a cut after b'\n' is always a char boundary.
            rest.as_bytes()[target..].iter().position(|&b| b == b'\n').map_or(rest.len(), |i| target + i + 1)
        };
        let (piece, after) = rest.split_at(cut);
        pieces.push((piece, line));
        line += piece.matches('\n').count() as u64;
        rest = after;
    }
    pieces
}

fn keys(map: &Map<String, Value>) -> String {
    let mut keys: Vec<&str> = map.keys().map(String::as_str).take(12).collect();
    keys.sort_unstable();
    let more = if map.len() > keys.len() { ", ..." } else { "" };
    format!("{}{more}", keys.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_in_parallel_equals_decoding_on_one_thread() {
        let good = r#"{"workflow_id":"w","started_at":"2026-11-28T02:00:00Z","provider":"p","model":"m","status":"ok"}"#;
        let lines: Vec<String> = (0..101)
            .map(|i| match i % 7 {
                3 => "not json".to_string(),
                5 => String::new(),
                _ => good.replace("\"w\"", &format!("\"w{i}\"")),
            })
            .collect();
        let text = lines.join("\n") + "\n";
        let one = Format::Attempts.decode_lines(&text, 40);
        for threads in [1, 2, 3, 8, 500] {
            let many = Format::Attempts.decode_lines_parallel(&text, 40, threads);
            assert_eq!(many.attempts, one.attempts, "{threads} threads");
            assert_eq!(many.rejections, one.rejections, "{threads} threads");
        }
        assert_eq!(one.rejections.len(), 14);
        assert_eq!(one.rejections[0].line, 43);
        assert_eq!(split_lines("", 1, 4), vec![]);
        assert_eq!(split_lines("a\nb\n", 1, 4), vec![("a\n", 1), ("b\n", 2)]);
    }

    /// Found by fuzzing (`attempts_jsonl`): a cut aimed inside a multi-byte
    /// character panicked, so on a machine with 3+ cores any file with
    /// non-ASCII text could stop `ingest`.
    #[test]
    fn a_cut_never_falls_inside_a_character() {
        let text = "ككككك\nك\nééé\n名前名前\n";
        for parts in 1..=text.len() {
            let pieces = split_lines(text, 1, parts);
            assert_eq!(pieces.iter().map(|(p, _)| *p).collect::<String>(), text, "{parts} parts");
        }
    }

    #[test]
    fn the_first_record_decides_and_text_inside_a_value_does_not() {
        let attempt = r#"{"workflow_id":"w","started_at":1,"provider":"p","model":"m","status":"ok","note":"\"resourceSpans\""}"#;
        assert_eq!(Format::detect(attempt), Ok(Format::Attempts));
        assert_eq!(Format::detect(r#"{"resourceSpans":[]}"#), Ok(Format::Otlp));
        assert_eq!(
            Format::detect(r#"{"call_type":"completion","litellm_call_id":"x","startTime":1.0}"#),
            Ok(Format::Litellm)
        );
        assert_eq!(
            Format::detect(r#"{"data":{"id":"gen-1","provider_responses":[]}}"#),
            Ok(Format::Openrouter)
        );
        assert_eq!(Format::detect("not json"), Ok(Format::Attempts));
    }

    #[test]
    fn an_unknown_or_ambiguous_first_record_names_the_flag() {
        let err = Format::detect(r#"{"foo":1}"#).unwrap_err();
        assert!(err.contains("--format") && err.contains("keys: foo"), "{err}");
        let err = Format::detect(r#"{"workflow_id":"w","resourceSpans":[]}"#).unwrap_err();
        assert!(err.contains("otlp, attempts"), "{err}");
    }

    #[test]
    fn an_attempt_record_mentioning_resource_spans_is_kept_as_an_attempt() {
        let line = r#"{"workflow_id":"w","started_at":1795831200000,"provider":"p","model":"m","status":"ok","resourceSpans_note":"x"}"#;
        let decoded = Format::detect(line).unwrap().decode_lines(line, 1);
        assert_eq!(decoded.attempts.len(), 1, "{:?}", decoded.rejections);
    }
}
