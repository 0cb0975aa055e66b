//! Request bodies: `Content-Encoding: gzip` inflated with the size limit
//! counted after inflation, so a small gzip bomb is refused, not expanded.

use std::io::Read;

use flate2::read::MultiGzDecoder;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BodyError {
    #[error("request body exceeds {limit} bytes (counted after decompression)")]
    TooLarge { limit: usize },
    #[error("request body is not valid gzip: {0}")]
    BadGzip(String),
    #[error("unsupported Content-Encoding `{0}` (use gzip or none)")]
    UnsupportedEncoding(String),
}

pub fn inflate(body: &[u8], content_encoding: Option<&str>, limit: usize) -> Result<Vec<u8>, BodyError> {
    match content_encoding.map(|e| e.trim().to_ascii_lowercase()) {
        None => plain(body, limit),
        Some(e) if e.is_empty() || e == "identity" => plain(body, limit),
        Some(e) if e == "gzip" || e == "x-gzip" => {
            let mut out = Vec::with_capacity(body.len().saturating_mul(4).min(limit));
            // One byte past the limit tells "exactly at the limit" from "over".
            MultiGzDecoder::new(body)
                .take(limit as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|err| BodyError::BadGzip(err.to_string()))?;
            if out.len() > limit { Err(BodyError::TooLarge { limit }) } else { Ok(out) }
        }
        Some(other) => Err(BodyError::UnsupportedEncoding(other)),
    }
}

fn plain(body: &[u8], limit: usize) -> Result<Vec<u8>, BodyError> {
    if body.len() > limit { Err(BodyError::TooLarge { limit }) } else { Ok(body.to_vec()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::GzEncoder;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn gzip_is_inflated_within_the_limit() {
        assert_eq!(inflate(&gzip(b"hello"), Some("gzip"), 5).unwrap(), b"hello");
    }

    #[test]
    fn a_small_bomb_is_refused_after_inflation() {
        let bomb = gzip(&vec![0u8; 1 << 20]);
        assert!(bomb.len() < 4096, "compresses to {} bytes", bomb.len());
        assert_eq!(inflate(&bomb, Some("gzip"), 64 * 1024), Err(BodyError::TooLarge { limit: 64 * 1024 }));
    }

    #[test]
    fn other_encodings_and_broken_gzip_are_explained() {
        assert!(matches!(inflate(b"x", Some("br"), 10), Err(BodyError::UnsupportedEncoding(_))));
        assert!(matches!(inflate(b"not gzip", Some("gzip"), 10), Err(BodyError::BadGzip(_))));
        assert_eq!(inflate(b"12345", None, 4), Err(BodyError::TooLarge { limit: 4 }));
    }
}
