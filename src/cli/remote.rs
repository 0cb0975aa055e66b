//! The read commands beside a running `serve`.
//!
//! DuckDB lets one process open a database file for writing and no other
//! open it at all, and `serve` keeps its file open. So `serve` writes where
//! it answers beside the database when it starts (`DB.serve`, removed when
//! it stops), and `report`, `audit` and `alerts` that find the file locked
//! by that process ask it instead: the same query, rendered by the same
//! code (the routes' `format` parameter), said so on stderr. With access
//! tokens on, they send `ATTEMPT_LEDGER_TOKEN` (a read token).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::service::http::DERIVATION_HEADER;
use crate::store::{Store, StoreError};

/// A read token for a service with access tokens on.
pub const TOKEN_ENV: &str = "ATTEMPT_LEDGER_TOKEN";

/// The address file of `db`.
pub fn address_file(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".serve");
    PathBuf::from(name)
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Address {
    /// `host:port` of the HTTP listener.
    http: String,
    pid: u32,
    tls: bool,
}

/// Removes the address file when `serve` stops.
pub struct Recorded(PathBuf);

impl Drop for Recorded {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Records, beside `db`, that this process serves it at `http`.
pub fn record(db: &Path, http: std::net::SocketAddr, tls: bool) -> anyhow::Result<Recorded> {
    let path = address_file(db);
    // An address of 0.0.0.0 or :: is reached on loopback from this machine.
    let http = match http.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => {
            std::net::SocketAddr::from(([127, 0, 0, 1], http.port()))
        }
        ip if ip.is_unspecified() => std::net::SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, http.port())),
        _ => http,
    };
    let text = serde_json::to_string(&Address { http: http.to_string(), pid: std::process::id(), tls })?;
    let mut file = std::fs::File::create(&path).with_context(|| format!("writing {}", path.display()))?;
    file.write_all(text.as_bytes())?;
    Ok(Recorded(path))
}

/// The `serve` that holds `db`, when `error` says the file is locked and
/// the address file beside it was written by the process holding the lock
/// (a file left by a killed `serve` names another process, or none).
fn holding(db: &Path, error: &StoreError) -> Option<Running> {
    let StoreError::Locked { holder, .. } = error else { return None };
    let text = std::fs::read_to_string(address_file(db)).ok()?;
    let address: Address = serde_json::from_str(&text).ok()?;
    holder.contains(&format!("PID {})", address.pid)).then_some(Running(address))
}

struct Running(Address);

impl Running {
    /// GETs `path_and_query` from the service: its body, or the error it answered.
    fn get(&self, path_and_query: &str) -> anyhow::Result<String> {
        if self.0.tls {
            bail!(
                "`serve` (pid {}) holds the database and listens with TLS: ask it over HTTPS \
                 (GET https://{}{path_and_query}), or stop it and run this again",
                self.0.pid,
                self.0.http
            );
        }
        let url = format!("http://{}{path_and_query}", self.0.http);
        eprintln!("the database is held by `serve` (pid {}): asking it, {url}", self.0.pid);
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let mut request = agent.get(&url);
        if let Ok(token) = std::env::var(TOKEN_ENV) {
            request = request.header("Authorization", &format!("Bearer {}", token.trim()));
        }
        let mut answer = request.call().with_context(|| format!("asking `serve` at {url}"))?;
        let status = answer.status();
        let body =
            answer.body_mut().read_to_string().with_context(|| format!("reading the answer of {url}"))?;
        if status.as_u16() == 401 {
            bail!("`serve` asks for a read token: set {TOKEN_ENV}");
        }
        if !status.is_success() {
            bail!("`serve` answered {status}: {}", body.trim());
        }
        match answer.headers().get(DERIVATION_HEADER).and_then(|v| v.to_str().ok()) {
            Some("complete") | None => {}
            Some(lag) => eprintln!("`serve` has not derived every write yet ({lag}): ask again for the rest"),
        }
        Ok(body)
    }
}

/// `path?query` of the pairs that have a value.
pub fn path_with(path: &str, pairs: &[(&str, Option<String>)]) -> String {
    let set: Vec<(&str, &str)> = pairs.iter().filter_map(|(k, v)| v.as_deref().map(|v| (*k, v))).collect();
    match serde_urlencoded::to_string(&set) {
        Ok(query) if !query.is_empty() => format!("{path}?{query}"),
        _ => path.to_string(),
    }
}

/// A window's parameters: `since`, `until`, `workflow`.
pub fn window_query(window: &crate::request::Window) -> Vec<(&'static str, Option<String>)> {
    vec![
        ("since", instant(window.since)),
        ("until", instant(window.until)),
        ("workflow", window.workflow.clone()),
    ]
}

/// What an instant is on the wire: RFC 3339, as `parse_time` reads it.
pub fn instant(t: Option<chrono::DateTime<chrono::Utc>>) -> Option<String> {
    t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
}

/// Options a running service cannot honour: it prices and audits with its
/// own tables. Refused rather than ignored.
fn refuse_local_files(running: &Running, files: &[(&str, bool)]) -> anyhow::Result<()> {
    if let Some((flag, _)) = files.iter().find(|(_, given)| *given) {
        bail!(
            "`serve` (pid {}) holds the database and answers with its own price table and policy, so {flag} \
             cannot apply: leave it out to ask `serve`, or stop it and run this again",
            running.0.pid
        );
    }
    Ok(())
}

/// How a `--format` value is spelled on the command line and in `format=`.
pub fn value_name(format: impl clap::ValueEnum) -> String {
    format.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default()
}

/// The database `db` opened for reading; `None` once the running `serve`
/// that holds it has answered `path_and_query` instead (`answer_instead`).
pub fn open_or_ask(
    db: &Path,
    files: &[(&str, bool)],
    path_and_query: impl FnOnce() -> String,
) -> anyhow::Result<Option<Store>> {
    match Store::open_for_reading(db) {
        Ok(store) => Ok(Some(store)),
        Err(err) if answer_instead(db, &err, files, path_and_query)? => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// When `error` is the lock of a running `serve`, prints its answer to
/// `path_and_query` (refusing the `files` options it cannot honour) and
/// returns true; false for any other error, which stays the caller's.
pub fn answer_instead(
    db: &Path,
    error: &StoreError,
    files: &[(&str, bool)],
    path_and_query: impl FnOnce() -> String,
) -> anyhow::Result<bool> {
    let Some(running) = holding(db, error) else { return Ok(false) };
    refuse_local_files(&running, files)?;
    print!("{}", running.get(&path_and_query())?);
    Ok(true)
}
