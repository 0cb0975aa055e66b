//! Access tokens: optional bearer tokens, each with one scope. `ingest`
//! tokens may write (`/v1/*`, OTLP/gRPC), `read` tokens may read (reports,
//! alerts, `/metrics`). With tokens configured, every route but `/healthz`
//! and `/readyz` needs one; without, the service only listens on loopback
//! (unless told otherwise) and checks the `Host` header, so a web page the
//! user visits cannot reach it through DNS rebinding.
//!
//! Tokens are kept as SHA-256 digests and compared in constant time; a
//! token never reaches a log.

use std::path::Path;

use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Ingest,
    Read,
}

/// The configured tokens; empty when access is open.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    digests: Vec<(Scope, [u8; 32])>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("cannot read the token file {path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("token file line {line}: expected `ingest TOKEN` or `read TOKEN`")]
    Syntax { line: usize },
    #[error("token file line {line}: a token has at least 16 characters, none of them spaces")]
    Weak { line: usize },
}

/// Why a request was not let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// No token, or one that is not configured: 401.
    Unauthenticated,
    /// A valid token of the other scope: 403.
    WrongScope,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Equal digests, in time that does not depend on where they differ.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Tokens {
    /// Lines `ingest TOKEN` or `read TOKEN`; blank lines and `#` comments
    /// are skipped.
    pub fn parse(text: &str) -> Result<Tokens, TokenError> {
        let mut digests = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (scope, token) =
                line.split_once(char::is_whitespace).ok_or(TokenError::Syntax { line: index + 1 })?;
            let scope = match scope {
                "ingest" => Scope::Ingest,
                "read" => Scope::Read,
                _ => return Err(TokenError::Syntax { line: index + 1 }),
            };
            let token = token.trim();
            if token.len() < 16 || token.contains(char::is_whitespace) {
                return Err(TokenError::Weak { line: index + 1 });
            }
            digests.push((scope, digest(token)));
        }
        Ok(Tokens { digests })
    }

    pub fn load(path: &Path) -> Result<Tokens, TokenError> {
        let text = attempt_core::files::read_config(path).map_err(|e| TokenError::Unreadable {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Tokens::parse(&text)
    }

    /// Whether any token is configured (access control on).
    pub fn enabled(&self) -> bool {
        !self.digests.is_empty()
    }

    /// Lets in a request carrying `authorization` (the header's value) for
    /// `scope`. Always lets in when no token is configured.
    pub fn check(&self, authorization: Option<&str>, scope: Scope) -> Result<(), Denied> {
        if !self.enabled() {
            return Ok(());
        }
        let presented = authorization
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .map(|t| digest(t.trim()))
            .ok_or(Denied::Unauthenticated)?;
        // Every configured token is compared, so the time says nothing of
        // which one matched.
        let matched: Vec<Scope> =
            self.digests.iter().filter(|(_, d)| same(d, &presented)).map(|(s, _)| *s).collect();
        if matched.contains(&scope) {
            Ok(())
        } else if matched.is_empty() {
            Err(Denied::Unauthenticated)
        } else {
            Err(Denied::WrongScope)
        }
    }
}

/// Without tokens, a `Host` header must name this machine: a page from
/// elsewhere that rebinds its name to 127.0.0.1 still sends its own name.
pub fn is_local_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host
            .rsplit_once(':')
            .map_or(host, |(name, port)| if port.chars().all(|c| c.is_ascii_digit()) { name } else { host }),
    };
    matches!(name.to_ascii_lowercase().as_str(), "localhost" | "127.0.0.1" | "::1")
        || name.starts_with("127.")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# tokens\ningest ingest-token-0123456789\nread   read-token-0123456789\n";

    #[test]
    fn scopes_are_separate() {
        let tokens = Tokens::parse(FILE).unwrap();
        assert!(tokens.enabled());
        let bearer = |t: &str| format!("Bearer {t}");
        assert_eq!(tokens.check(Some(&bearer("ingest-token-0123456789")), Scope::Ingest), Ok(()));
        assert_eq!(tokens.check(Some(&bearer("read-token-0123456789")), Scope::Read), Ok(()));
        assert_eq!(
            tokens.check(Some(&bearer("read-token-0123456789")), Scope::Ingest),
            Err(Denied::WrongScope)
        );
        assert_eq!(
            tokens.check(Some(&bearer("guess-0123456789012")), Scope::Read),
            Err(Denied::Unauthenticated)
        );
        assert_eq!(tokens.check(None, Scope::Read), Err(Denied::Unauthenticated));
        assert_eq!(tokens.check(Some("Basic abc"), Scope::Read), Err(Denied::Unauthenticated));
        assert_eq!(Tokens::default().check(None, Scope::Ingest), Ok(()));
    }

    #[test]
    fn a_bad_file_names_its_line() {
        assert_eq!(Tokens::parse("write abcdefghijklmnopq").unwrap_err(), TokenError::Syntax { line: 1 });
        assert_eq!(Tokens::parse("\nread short").unwrap_err(), TokenError::Weak { line: 2 });
    }

    #[test]
    fn only_this_machine_is_a_local_host() {
        for host in ["localhost", "localhost:4318", "127.0.0.1:4318", "[::1]:4318", "127.0.0.2"] {
            assert!(is_local_host(host), "{host}");
        }
        for host in ["evil.example", "evil.example:4318", "10.0.0.1:4318", "localhost.evil.example"] {
            assert!(!is_local_host(host), "{host}");
        }
    }
}
