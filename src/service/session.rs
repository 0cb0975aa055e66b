//! Browser sessions for a service with access tokens: a person pastes a
//! `read` token into `/login` once, and gets an HttpOnly, SameSite=Strict
//! cookie that lets the dashboard's pages and their JSON reads in. A script
//! keeps using `Authorization: Bearer`. Sessions only ever read: the write
//! routes never look at the cookie, so no page can make a browser write.
//!
//! The cookie holds 256 random bits; the service keeps their SHA-256
//! digests with an expiry, at most `MAX_SESSIONS` (the oldest go first).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

pub const SESSION_COOKIE: &str = "attempt_ledger_session";
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Sessions kept at once; a login past it ends the session closest to expiry.
pub const MAX_SESSIONS: usize = 10_000;

#[derive(Default)]
pub struct Sessions {
    live: Mutex<HashMap<[u8; 32], Instant>>,
}

fn digest(value: &str) -> [u8; 32] {
    Sha256::digest(value.as_bytes()).into()
}

/// The value of cookie `name` in a `Cookie` header.
fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name).then_some(value)
    })
}

impl Sessions {
    /// A new session; its cookie value. Fails only if the OS has no
    /// randomness to give.
    pub fn open(&self) -> Result<String, getrandom::Error> {
        let mut id = [0u8; 32];
        getrandom::fill(&mut id)?;
        let value: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let now = Instant::now();
        if let Ok(mut live) = self.live.lock() {
            live.retain(|_, expires| *expires > now);
            if live.len() >= MAX_SESSIONS
                && let Some(oldest) = live.iter().min_by_key(|(_, expires)| **expires).map(|(k, _)| *k)
            {
                live.remove(&oldest);
            }
            live.insert(digest(&value), now + SESSION_LIFETIME);
        }
        Ok(value)
    }

    /// Whether a request's `Cookie` header carries a live session.
    pub fn is_live(&self, cookie_header: Option<&str>) -> bool {
        let Some(value) = cookie_header.and_then(|h| cookie(h, SESSION_COOKIE)) else { return false };
        let now = Instant::now();
        self.live.lock().is_ok_and(|live| live.get(&digest(value)).is_some_and(|expires| *expires > now))
    }

    pub fn close(&self, cookie_header: Option<&str>) {
        if let Some(value) = cookie_header.and_then(|h| cookie(h, SESSION_COOKIE))
            && let Ok(mut live) = self.live.lock()
        {
            live.remove(&digest(value));
        }
    }
}

/// `Set-Cookie` for a session; `Secure` when the service speaks TLS.
pub fn set_cookie(value: &str, secure: bool) -> String {
    format!(
        "{SESSION_COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
        SESSION_LIFETIME.as_secs(),
        if secure { "; Secure" } else { "" }
    )
}

pub fn clear_cookie(secure: bool) -> String {
    format!(
        "{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{}",
        if secure { "; Secure" } else { "" }
    )
}

/// Where to go after logging in: a path on this service only, so a link
/// cannot turn the login page into a redirect to another site.
pub fn local_target(next: Option<&str>) -> &str {
    match next {
        Some(path) if path.starts_with('/') && !path.starts_with("//") && !path.contains('\\') => path,
        _ => "/",
    }
}

/// The login form: no script, no external resource.
pub const LOGIN_PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>attempt-ledger: sign in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:16px system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem}
input{width:100%;padding:.5rem;font:inherit;box-sizing:border-box}button{margin-top:1rem;padding:.5rem 1rem;font:inherit}</style>
</head><body><h1>attempt-ledger</h1>
<p>This service asks for an access token. Paste a <code>read</code> token; your browser keeps a session cookie for 12 hours.</p>
<form method="post" action="/login"><label>Read token<br><input type="password" name="token" autocomplete="off" required autofocus></label>
<input type="hidden" name="next" value="NEXT_PATH"><button type="submit">Sign in</button></form>
</body></html>
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_lives_until_closed_and_only_its_own_value_opens_it() {
        let sessions = Sessions::default();
        let value = sessions.open().unwrap();
        assert_eq!(value.len(), 64);
        let header = format!("theme=dark; {SESSION_COOKIE}={value}; other=1");
        assert!(sessions.is_live(Some(&header)));
        assert!(!sessions.is_live(Some(&format!("{SESSION_COOKIE}={}", "0".repeat(64)))));
        assert!(!sessions.is_live(Some("theme=dark")));
        assert!(!sessions.is_live(None));
        sessions.close(Some(&header));
        assert!(!sessions.is_live(Some(&header)));
    }

    #[test]
    fn sessions_are_bounded() {
        let sessions = Sessions::default();
        for _ in 0..MAX_SESSIONS + 5 {
            sessions.open().unwrap();
        }
        assert_eq!(sessions.live.lock().unwrap().len(), MAX_SESSIONS);
    }

    #[test]
    fn the_cookie_is_http_only_strict_and_secure_over_tls() {
        let cookie = set_cookie("abc", true);
        for part in ["HttpOnly", "SameSite=Strict", "Secure", "Path=/"] {
            assert!(cookie.contains(part), "{cookie}");
        }
        assert!(!set_cookie("abc", false).contains("Secure"));
    }

    #[test]
    fn only_local_paths_are_followed_after_login() {
        assert_eq!(local_target(Some("/workflows/abc?x=1")), "/workflows/abc?x=1");
        for bad in ["https://evil.example/", "//evil.example/", "/\\evil.example", "evil"] {
            assert_eq!(local_target(Some(bad)), "/", "{bad}");
        }
        assert_eq!(local_target(None), "/");
    }
}
