//! The read commands beside a running `serve`.
//!
//! DuckDB lets one process open a database file for writing and no other
//! open it at all, and `serve` keeps its file open. So `serve` writes where
//! it answers beside the database when it starts (`DB.serve`, removed when
//! it stops), and `report`, `audit` and `alerts` that find the file locked
//! by that process ask it instead: the same query, rendered by the same
//! code (the routes' `format` parameter), said so on stderr. With access
//! tokens on, they send `ATTEMPT_LEDGER_TOKEN` (a read token).
//!
//! The address file is a hint, never trusted: it is asked only when the
//! process it names holds the database's lock and (on Linux) has a socket
//! listening at the address it names, so a stale file, or one forged beside
//! the database, never receives a token or stands in for the answer.

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
    // Written whole under another name (readable by its owner only), then
    // renamed over whatever was there: a reader never sees half a file.
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut staged =
        tempfile::NamedTempFile::new_in(dir).with_context(|| format!("writing {}", path.display()))?;
    staged.write_all(text.as_bytes())?;
    staged.persist(&path).with_context(|| format!("writing {}", path.display()))?;
    Ok(Recorded(path))
}

/// The most an address file holds: a larger one is not `serve`'s.
const MAX_ADDRESS_BYTES: u64 = 4096;

/// The `serve` that holds `db`, when `error` says the file is locked, the
/// address file beside it names the process holding the lock, and that
/// process listens at the address it names (a file left by a killed
/// `serve`, or written by anyone else, names another process or another
/// listener). `Err` when a file is there but fails those checks.
fn holding(db: &Path, error: &StoreError) -> anyhow::Result<Option<Running>> {
    use std::io::Read;
    let StoreError::Locked { holder, .. } = error else { return Ok(None) };
    let path = address_file(db);
    let Ok(file) = std::fs::File::open(&path) else { return Ok(None) };
    let mut text = String::new();
    let read = file.take(MAX_ADDRESS_BYTES + 1).read_to_string(&mut text);
    let address = read
        .ok()
        .filter(|_| text.len() as u64 <= MAX_ADDRESS_BYTES)
        .and_then(|_| serde_json::from_str::<Address>(&text).ok());
    let Some(address) = address else {
        bail!("{} is not an address file `serve` wrote: not asking anything at it", path.display())
    };
    if !holder.contains(&format!("PID {})", address.pid)) {
        return Ok(None);
    }
    let listening = address
        .http
        .parse::<std::net::SocketAddr>()
        .map_err(|e| e.to_string())
        .and_then(|at| listener::holds(address.pid, at));
    match listening {
        Ok(true) => Ok(Some(Running(address))),
        Ok(false) => bail!(
            "{} says `serve` (pid {}) listens at {}, and that process has no socket listening there: \
             not asking it (the file was changed, or is not `serve`'s). Stop the process holding the \
             database and run this again",
            path.display(),
            address.pid,
            address.http
        ),
        Err(why) => bail!(
            "cannot tell whether pid {} listens at {} as {} says ({why}): not asking it. Stop the process \
             holding the database and run this again",
            address.pid,
            address.http,
            path.display()
        ),
    }
}

/// Whether a process listens at an address: its open sockets against the
/// kernel's table of listening TCP sockets.
mod listener {
    use std::collections::HashSet;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

    /// Whether process `pid` holds a TCP socket listening at `at` (or at the
    /// unspecified address on its port, when `at` is loopback: `serve`
    /// records loopback for 0.0.0.0 and ::).
    #[cfg(target_os = "linux")]
    pub fn holds(pid: u32, at: SocketAddr) -> Result<bool, String> {
        let mut inodes = HashSet::new();
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            let Ok(text) = std::fs::read_to_string(table) else { continue };
            inodes.extend(text.lines().skip(1).filter_map(|line| listening_inode(line, at)));
        }
        if inodes.is_empty() {
            return Ok(false);
        }
        let fds = format!("/proc/{pid}/fd");
        let entries = std::fs::read_dir(&fds).map_err(|e| format!("{fds}: {e}"))?;
        Ok(entries.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .ok()
                .and_then(|target| {
                    target.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse::<u64>().ok()
                })
                .is_some_and(|inode| inodes.contains(&inode))
        }))
    }

    #[cfg(not(target_os = "linux"))]
    pub fn holds(_pid: u32, _at: SocketAddr) -> Result<bool, String> {
        Err("only Linux shows which process owns a socket".to_string())
    }

    /// The inode of a row of /proc/net/tcp{,6} that listens at `at`.
    pub(super) fn listening_inode(line: &str, at: SocketAddr) -> Option<u64> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
        if *state != "0A" {
            return None;
        }
        let (ip, port) = local.split_once(':')?;
        if u16::from_str_radix(port, 16).ok()? != at.port() {
            return None;
        }
        let ip = kernel_ip(ip)?;
        let matches = ip == at.ip() || (ip.is_unspecified() && at.ip().is_loopback());
        matches.then(|| inode.parse().ok()).flatten()
    }

    /// An address as the kernel's tables write it: 32-bit words in hex, each
    /// in the machine's byte order (little-endian here).
    fn kernel_ip(hex: &str) -> Option<IpAddr> {
        let words: Vec<u32> = (0..hex.len() / 8)
            .map(|i| u32::from_str_radix(hex.get(i * 8..i * 8 + 8)?, 16).ok())
            .collect::<Option<_>>()?;
        match words.as_slice() {
            [v4] => Some(IpAddr::V4(Ipv4Addr::from(v4.to_le_bytes()))),
            [a, b, c, d] => {
                let mut bytes = [0u8; 16];
                for (chunk, word) in bytes.chunks_mut(4).zip([a, b, c, d]) {
                    chunk.copy_from_slice(&word.to_le_bytes());
                }
                Some(IpAddr::V6(Ipv6Addr::from(bytes)))
            }
            _ => None,
        }
    }
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
pub fn window_query(window: &attempt_core::request::Window) -> Vec<(&'static str, Option<String>)> {
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
    let Some(running) = holding(db, error)? else { return Ok(false) };
    refuse_local_files(&running, files)?;
    print!("{}", running.get(&path_and_query())?);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::listener::listening_inode;

    #[test]
    fn rows_of_the_kernels_socket_tables_are_read_by_address_and_state() {
        let v4 = "   0: 0100007F:10E1 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1";
        let at = "127.0.0.1:4321".parse().unwrap();
        assert_eq!(listening_inode(v4, at), Some(4242));
        assert_eq!(listening_inode(v4, "127.0.0.1:4322".parse().unwrap()), None, "another port");
        assert_eq!(listening_inode(v4, "10.0.0.5:4321".parse().unwrap()), None, "another address");
        let established = v4.replace(" 0A ", " 01 ");
        assert_eq!(listening_inode(&established, at), None, "not listening");
        let any = v4.replace("0100007F", "00000000");
        assert_eq!(listening_inode(&any, at), Some(4242), "0.0.0.0 is reached on loopback");
        assert_eq!(listening_inode(&any, "10.0.0.5:4321".parse().unwrap()), None);
        let v6 = "   0: 00000000000000000000000001000000:10E1 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 77 1";
        assert_eq!(listening_inode(v6, "[::1]:4321".parse().unwrap()), Some(77));
    }
}
