//! Where ingested bytes come from: files, gzip files, standard input; and
//! how they are cut into chunks of whole lines so a file of any size is
//! decoded and stored in bounded memory.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use flate2::read::MultiGzDecoder;

use super::Rejection;

/// One input named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Stdin,
    File(PathBuf),
}

impl Source {
    pub fn parse(arg: &str) -> Self {
        if arg == "-" { Source::Stdin } else { Source::File(PathBuf::from(arg)) }
    }

    pub fn display_name(&self) -> String {
        match self {
            Source::Stdin => "<stdin>".to_string(),
            Source::File(path) => path.display().to_string(),
        }
    }

    /// The input's size in bytes when it is a file (compressed size for
    /// `.gz`); `None` for standard input or a file that cannot be read.
    pub fn size(&self) -> Option<u64> {
        match self {
            Source::Stdin => None,
            Source::File(path) => std::fs::metadata(path).ok().map(|m| m.len()),
        }
    }

    /// Opens the input; `.gz` files are decompressed (concatenated gzip
    /// members too, as `cat a.gz b.gz` produces). `bytes_read` counts the
    /// bytes taken from the underlying file, for progress.
    pub fn open(&self, bytes_read: Arc<AtomicU64>) -> io::Result<(Box<dyn BufRead + Send>, Option<u64>)> {
        match self {
            Source::Stdin => Ok((Box::new(BufReader::new(io::stdin())), None)),
            Source::File(path) => {
                let file = File::open(path)?;
                let size = file.metadata().ok().map(|m| m.len());
                let counted = CountingReader { inner: file, count: bytes_read };
                let reader: Box<dyn BufRead + Send> = if is_gzip(path) {
                    Box::new(BufReader::with_capacity(1 << 16, MultiGzDecoder::new(counted)))
                } else {
                    Box::new(BufReader::with_capacity(1 << 16, counted))
                };
                Ok((reader, size))
            }
        }
    }
}

fn is_gzip(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("gz"))
}

struct CountingReader<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A run of whole lines from one input.
#[derive(Debug, Default)]
pub struct Chunk {
    /// Line number of the first line of `text`.
    pub first_line: u64,
    /// The lines, newline-separated; a line that was not UTF-8 is left
    /// blank here (so numbering holds) and reported in `rejections`.
    pub text: String,
    pub rejections: Vec<Rejection>,
}

/// The longest line read; a longer one is rejected without being held in
/// memory (a record is a few hundred bytes; an OTLP export line with many
/// spans can reach megabytes).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// The largest input read whole to see whether it is one JSON document (an
/// array of records, or one record over several lines); past it an input
/// is read as lines.
pub const MAX_DOCUMENT_BYTES: usize = 64 << 20;

/// An input as it is to be read: lines, or one JSON document.
pub enum Framed {
    Lines(Box<dyn BufRead + Send>),
    /// The whole input, which parses as one JSON value.
    Document(String),
}

/// Decides how `reader` is read, with the rule a body with no declared type
/// follows (`framing`): one JSON document only when the whole input parses
/// as one, else lines. Only what it must is read ahead: a first line that is
/// a whole JSON value followed by more lines is JSON lines, and is never
/// held; an input whose first line is not a whole value is held up to
/// `MAX_DOCUMENT_BYTES` to try it as a document.
pub fn frame_input(mut reader: Box<dyn BufRead + Send>) -> io::Result<Framed> {
    let mut head = Vec::new();
    // The first non-blank line.
    let first = loop {
        let start = head.len();
        if (&mut reader).take(MAX_LINE_BYTES as u64).read_until(b'\n', &mut head)? == 0 {
            return Ok(Framed::Lines(chained(head, reader)));
        }
        if !head[start..].iter().all(u8::is_ascii_whitespace) {
            break start;
        }
    };
    let line = std::str::from_utf8(&head[first..]).map(str::trim).unwrap_or("");
    let whole_value = serde_json::from_str::<&serde_json::value::RawValue>(line).is_ok();
    if whole_value {
        // A document only if nothing but blank lines follows.
        loop {
            let start = head.len();
            if (&mut reader).take(MAX_LINE_BYTES as u64).read_until(b'\n', &mut head)? == 0 {
                return Ok(document(head, reader));
            }
            if !head[start..].iter().all(u8::is_ascii_whitespace) {
                return Ok(Framed::Lines(chained(head, reader)));
            }
        }
    }
    if !(line.starts_with('[') || line.starts_with('{')) {
        return Ok(Framed::Lines(chained(head, reader)));
    }
    let room = MAX_DOCUMENT_BYTES.saturating_sub(head.len()) as u64 + 1;
    (&mut reader).take(room).read_to_end(&mut head)?;
    if head.len() > MAX_DOCUMENT_BYTES {
        return Ok(Framed::Lines(chained(head, reader)));
    }
    Ok(document(head, reader))
}

/// `head`, the whole input, as a document if it parses as one JSON value.
fn document(head: Vec<u8>, reader: Box<dyn BufRead + Send>) -> Framed {
    match String::from_utf8(head) {
        Ok(text) if serde_json::from_str::<&serde_json::value::RawValue>(text.trim()).is_ok() => {
            Framed::Document(text)
        }
        Ok(text) => Framed::Lines(chained(text.into_bytes(), reader)),
        Err(err) => Framed::Lines(chained(err.into_bytes(), reader)),
    }
}

fn chained(head: Vec<u8>, rest: Box<dyn BufRead + Send>) -> Box<dyn BufRead + Send> {
    Box::new(io::Cursor::new(head).chain(rest))
}

/// Reads up to and including the next newline, keeping nothing.
fn skip_line(reader: &mut impl BufRead) -> io::Result<()> {
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            return Ok(());
        }
        match available.iter().position(|b| *b == b'\n') {
            Some(end) => {
                reader.consume(end + 1);
                return Ok(());
            }
            None => {
                let n = available.len();
                reader.consume(n);
            }
        }
    }
}

/// Reads `reader` to the end in chunks of at most `lines_per_chunk` lines.
pub fn for_each_chunk<E: From<io::Error>>(
    mut reader: impl BufRead,
    lines_per_chunk: usize,
    mut handle: impl FnMut(Chunk) -> Result<(), E>,
) -> Result<(), E> {
    let mut line_no = 0u64;
    let mut buf = Vec::new();
    loop {
        let mut chunk = Chunk { first_line: line_no + 1, ..Chunk::default() };
        let mut lines = 0;
        while lines < lines_per_chunk {
            buf.clear();
            if (&mut reader).take(MAX_LINE_BYTES as u64 + 1).read_until(b'\n', &mut buf)? == 0 {
                break;
            }
            line_no += 1;
            lines += 1;
            if buf.len() > MAX_LINE_BYTES && buf.last() != Some(&b'\n') {
                // Not kept: the rest of the line is read past, never held.
                skip_line(&mut reader)?;
                chunk.rejections.push(Rejection {
                    line: line_no,
                    reason: format!("line is longer than {MAX_LINE_BYTES} bytes"),
                });
                chunk.text.push('\n');
                continue;
            }
            match std::str::from_utf8(&buf) {
                Ok(line) => chunk.text.push_str(line.trim_end_matches(['\n', '\r'])),
                Err(_) => chunk
                    .rejections
                    .push(Rejection { line: line_no, reason: "line is not valid UTF-8".to_string() }),
            }
            chunk.text.push('\n');
        }
        if lines == 0 {
            return Ok(());
        }
        handle(chunk)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(input: &str) -> Framed {
        let reader: Box<dyn BufRead + Send> = Box::new(io::Cursor::new(input.as_bytes().to_vec()));
        frame_input(reader).unwrap()
    }

    fn lines_of(framed: Framed) -> String {
        let Framed::Lines(mut reader) = framed else { panic!("read as a document") };
        let mut text = String::new();
        reader.read_to_string(&mut text).unwrap();
        text
    }

    #[test]
    fn an_input_is_a_document_only_when_the_whole_of_it_parses_as_one() {
        for document in
            ["[{\"a\":1},{\"a\":2}]", "\n[\n  {\"a\": 1},\n  {\"a\": 2}\n]\n\n", "{\n \"a\": 1\n}"]
        {
            assert!(matches!(framed(document), Framed::Document(text) if text == document), "{document:?}");
        }
        // JSON lines, the first of them an array: lines, every byte kept.
        for lines in
            ["[1,2]\n{\"a\":1}\n", "{\"a\":1}\n{\"a\":2}", "[\n{\"a\":1}\nnot json\n", "x\ny\n", "", "\n\n"]
        {
            assert_eq!(lines_of(framed(lines)), lines, "{lines:?}");
        }
        // A one-line record is the same either way: lines keep the reader streaming.
        assert!(matches!(framed("{\"a\":1}\n"), Framed::Document(_)));
    }

    #[test]
    fn an_input_past_the_document_bound_is_read_as_lines() {
        let mut big = String::from("[\n");
        while big.len() <= MAX_DOCUMENT_BYTES {
            big.push_str("{\"a\": 1},\n");
        }
        big.push_str("{\"a\": 1}\n]\n");
        let text = lines_of(framed(&big));
        assert_eq!(text.len(), big.len(), "nothing is lost");
    }

    #[test]
    fn an_overlong_line_is_rejected_and_skipped_not_held() {
        let mut input = b"a\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', MAX_LINE_BYTES + 10));
        input.extend(b"\nb\n");
        let mut chunks = Vec::new();
        for_each_chunk::<io::Error>(input.as_slice(), 10, |c| {
            chunks.push(c);
            Ok(())
        })
        .unwrap();
        assert_eq!(chunks[0].text, "a\n\nb\n");
        assert_eq!(chunks[0].rejections[0].line, 2);
        assert!(chunks[0].rejections[0].reason.contains("longer than"));
    }

    #[test]
    fn chunks_keep_line_numbers_and_flag_bad_utf8() {
        let input: &[u8] = b"a\nb\n\xff\xfe\nd";
        let mut chunks = Vec::new();
        for_each_chunk::<io::Error>(input, 2, |c| {
            chunks.push(c);
            Ok(())
        })
        .unwrap();
        assert_eq!(chunks.len(), 2);
        assert_eq!((chunks[0].first_line, chunks[0].text.as_str()), (1, "a\nb\n"));
        assert_eq!((chunks[1].first_line, chunks[1].text.as_str()), (3, "\nd\n"));
        assert_eq!(
            chunks[1].rejections,
            vec![Rejection { line: 3, reason: "line is not valid UTF-8".into() }]
        );
    }
}
