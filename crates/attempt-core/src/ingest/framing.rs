//! How a body is cut into records, before any record is decoded.
//!
//! A declared line type (`application/x-ndjson`, `application/jsonl`, ...)
//! means one record per line, whatever the first byte is: a first line that
//! happens to be a JSON array is one bad record, not the whole body. A
//! declared `application/json`, and an input with no declared type (a file,
//! standard input), is one JSON array of records, or one record, only when
//! the whole of it parses as one JSON value; anything else is read as lines.
//! So every record of a body is judged on its own, in every framing.

use serde_json::value::RawValue;

use super::format::Format;
use super::{Decoded, MAX_KEPT_NOTES};

/// The framing a sender declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// One record per line.
    Lines,
    /// One JSON document (an array of records, or one record) when the body
    /// parses as one; else lines.
    Document,
}

/// Media types that declare one record per line (JSON Lines and NDJSON
/// under the names clients send them with).
pub const LINE_TYPES: [&str; 6] = [
    "application/x-ndjson",
    "application/ndjson",
    "application/jsonl",
    "application/x-jsonl",
    "application/jsonlines",
    "application/x-jsonlines",
];

impl Framing {
    /// The framing a `Content-Type` declares: a line type, lines; anything
    /// else (`application/json`, `+json`, none), a document.
    pub fn of_media_type(content_type: &str) -> Framing {
        let media = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        if LINE_TYPES.contains(&media.as_str()) { Framing::Lines } else { Framing::Document }
    }
}

/// A body cut into records.
#[derive(Debug)]
pub enum Framed<'a> {
    /// Lines; blank ones hold no record.
    Lines(&'a str),
    /// The elements of one JSON array, numbered from 1 in rejections.
    Array(Vec<&'a RawValue>),
    /// One JSON value that is not an array: one record.
    One(&'a str),
}

/// Cuts `body` into records as `framing` says.
pub fn frame(body: &str, framing: Framing) -> Framed<'_> {
    if framing == Framing::Lines {
        return Framed::Lines(body);
    }
    let trimmed = body.trim();
    // Parsed as one value without building it: a body of JSON lines fails
    // at the end of its first line, so trying costs a line.
    if trimmed.starts_with('[') {
        match super::array_elements(trimmed) {
            Ok(elements) => Framed::Array(elements),
            Err(_) => Framed::Lines(body),
        }
    } else if serde_json::from_str::<&RawValue>(trimmed).is_ok() {
        Framed::One(trimmed)
    } else {
        Framed::Lines(body)
    }
}

impl Framed<'_> {
    /// The text of each record with its number (a line number, or an
    /// element's 1-based index), blank lines left out.
    pub fn records(&self) -> Box<dyn Iterator<Item = (u64, &str)> + '_> {
        match self {
            Framed::Lines(text) => Box::new(
                text.lines()
                    .enumerate()
                    .filter(|(_, line)| !line.trim().is_empty())
                    .map(|(index, line)| (index as u64 + 1, line)),
            ),
            Framed::Array(elements) => Box::new(
                elements.iter().enumerate().map(|(index, element)| (index as u64 + 1, element.get())),
            ),
            Framed::One(text) => Box::new(std::iter::once((1, *text))),
        }
    }

    /// The first record's text: what decides the format when none is named.
    pub fn first(&self) -> Option<&str> {
        self.records().next().map(|(_, text)| text)
    }

    /// Decodes every record as `format` (lines on up to `threads` threads).
    pub fn decode(&self, format: Format, threads: usize) -> Decoded {
        match self {
            Framed::Lines(text) => format.decode_lines_parallel(text, 1, threads),
            _ => {
                let mut decoded = Decoded::default();
                for (number, text) in self.records() {
                    format.decode_record(text, number, &mut decoded);
                }
                decoded
            }
        }
    }

    /// At most what these records hold once decoded, read without
    /// decoding one (`record_held_at_most` of each).
    pub fn held_at_most(&self) -> usize {
        self.records().map(|(_, text)| super::record_held_at_most(text)).fold(0, usize::saturating_add)
    }

    /// The format of these records: `named`, else the first record's.
    pub fn format(&self, named: Option<Format>) -> Result<Format, String> {
        match (named, self.first()) {
            (Some(format), _) => Ok(format),
            (None, Some(first)) => Format::detect(first),
            (None, None) => Ok(Format::Attempts),
        }
    }
}

/// Decodes a body: framed as declared, in the format named or told by its
/// first record. An undecidable format refuses the whole body (nothing of it
/// can be read); every other problem is one record's rejection.
pub fn decode_body(body: &str, framing: Framing, named: Option<Format>) -> Result<Decoded, String> {
    let framed = frame(body, framing);
    let format = framed.format(named)?;
    Ok(framed.decode(format, 1))
}

/// What the answer to a body must add up to: every record received is
/// accepted, a duplicate, a conflict or rejected. `received` counts what the
/// decoders saw (`Decoded::received`); this checks a decode's own side of
/// it: no record is both kept and rejected, and the notes stay bounded.
pub fn check_accounting(decoded: &Decoded) -> Result<(), String> {
    let kept = decoded.records;
    if decoded.received() != kept + decoded.rejected {
        return Err(format!(
            "received {} but kept {kept} and rejected {}",
            decoded.received(),
            decoded.rejected
        ));
    }
    if decoded.rejections.len() > MAX_KEPT_NOTES || decoded.rejections.len() as u64 > decoded.rejected {
        return Err(format!("{} reasons kept for {} rejections", decoded.rejections.len(), decoded.rejected));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"workflow_id":"w1","started_at":"2026-11-28T02:00:00Z","provider":"openai","model":"m","status":"ok"}"#;

    fn good(i: usize) -> String {
        GOOD.replace("\"w1\"", &format!("\"w{i}\""))
    }

    #[test]
    fn a_declared_line_type_reads_lines_even_when_the_first_is_an_array() {
        let body = format!("[1, 2]\n{}\n{}\n", good(1), good(2));
        let decoded = decode_body(&body, Framing::Lines, None).unwrap();
        assert_eq!(decoded.attempts.len(), 2);
        assert_eq!(decoded.rejected, 1);
        assert_eq!(decoded.rejections[0].line, 1);
        assert!(decoded.rejections[0].reason.contains("expected a JSON object, got an array"));
        assert_eq!(decoded.received(), 3);
    }

    #[test]
    fn a_document_is_an_array_or_one_record_only_when_it_parses_as_one() {
        let array = format!("[{},\n {}, 7]", good(1), good(2));
        let decoded = decode_body(&array, Framing::Document, None).unwrap();
        assert_eq!((decoded.attempts.len(), decoded.rejected), (2, 1));
        assert_eq!(decoded.rejections[0].line, 3, "an element is numbered by its index");
        // Pretty-printed, one record over several lines.
        let pretty =
            serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(GOOD).unwrap()).unwrap();
        assert_eq!(decode_body(&pretty, Framing::Document, None).unwrap().attempts.len(), 1);
        // JSON lines sent as application/json: lines, each on its own.
        let lines = format!("[1]\n{}\n{}\n", good(1), good(2));
        let decoded = decode_body(&lines, Framing::Document, None).unwrap();
        assert_eq!((decoded.attempts.len(), decoded.rejected, decoded.received()), (2, 1, 3));
        // Under a line type the same array is one bad line per line.
        let decoded = decode_body(&array, Framing::Lines, None).unwrap();
        assert_eq!((decoded.attempts.len(), decoded.rejected), (0, 2));
    }

    #[test]
    fn an_array_of_another_format_is_told_by_its_first_element() {
        let payload = r#"{"call_type":"acompletion","litellm_call_id":"c1","startTime":1795831200.0,"endTime":1795831201.0,"status":"success","model":"gpt-4o","custom_llm_provider":"openai","trace_id":"t1"}"#;
        let body = format!("[{payload}]");
        let framed = frame(&body, Framing::Document);
        assert_eq!(framed.format(None), Ok(Format::Litellm));
        let decoded = framed.decode(Format::Litellm, 1);
        assert_eq!(decoded.attempts.len(), 1, "{:?}", decoded.rejections);
    }

    #[test]
    fn media_types_name_their_framing() {
        assert_eq!(Framing::of_media_type("application/x-ndjson; charset=utf-8"), Framing::Lines);
        assert_eq!(Framing::of_media_type("Application/JSONL"), Framing::Lines);
        assert_eq!(Framing::of_media_type("application/json"), Framing::Document);
        assert_eq!(Framing::of_media_type("application/vnd.api+json"), Framing::Document);
        assert_eq!(Framing::of_media_type(""), Framing::Document);
    }

    #[test]
    fn blank_bodies_and_lines_hold_no_record() {
        for framing in [Framing::Lines, Framing::Document] {
            for body in ["", "\n\n", "  \n"] {
                let decoded = decode_body(body, framing, None).unwrap();
                assert_eq!(decoded.received(), 0, "{body:?}");
            }
        }
        let decoded = decode_body("[]", Framing::Document, None).unwrap();
        assert_eq!(decoded.received(), 0);
    }
}
