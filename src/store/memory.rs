//! How much memory DuckDB may take, by job (docs/ingest.md).
//!
//! A long-running `serve` shares its machine with what it observes: it keeps
//! a fixed ceiling, and its sorts spill to disk past it. A one-off bulk job
//! (`ingest`, `rebuild`, `export`) is what the machine is doing: at 512MB a
//! rebuild of 1.17M attempts spent 15-35 % of its time spilling and
//! faulting, so a bulk job takes a share of the memory this process may
//! use, within a cap. `ATTEMPT_LEDGER_MEMORY_LIMIT` wins for every job.

use std::fmt;

use super::env::MEMORY_LIMIT_ENV;

/// What a process opens its database for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// `serve`, and commands that read (reports, audits, alerts, tune).
    Serve,
    /// `ingest`, `rebuild`, `export`, `report --lake`: one-off passes over
    /// many attempts.
    Bulk,
}

/// The ceiling of `serve` and of readers.
pub const SERVE_LIMIT_BYTES: u64 = 512 * MIB;
/// A bulk job's share of the memory the process may use (the machine's, or
/// its cgroup's when that is less) ...
pub const BULK_SHARE: u64 = 4;
/// ... and its cap, which keeps a bulk job's peak RSS under 1.5 GiB: an
/// ingest of 11.7M attempts peaked at 1.27 GiB under 1 GiB, and at 2.2 GiB
/// under 2 GiB.
pub const BULK_CAP_BYTES: u64 = GIB;

const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;

/// The memory limit a process sets, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryLimit {
    /// DuckDB's spelling (`512MiB`, or the environment's value verbatim).
    pub setting: String,
    pub reason: Reason,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// `ATTEMPT_LEDGER_MEMORY_LIMIT` said so.
    Environment,
    /// `serve`'s fixed ceiling.
    Ceiling,
    /// A bulk job's share of `available` bytes, within the floor and cap.
    Share { available: u64 },
}

impl MemoryLimit {
    /// The limit for `job` in this process: the environment's, else the
    /// job's rule.
    pub fn for_job(job: Job) -> Self {
        match std::env::var(MEMORY_LIMIT_ENV) {
            Ok(setting) => Self { setting, reason: Reason::Environment },
            Err(_) => Self::by_rule(job, usable_memory()),
        }
    }

    /// The job's rule, given the bytes the process may use (`None`: not
    /// known, as off Linux: the ceiling).
    pub fn by_rule(job: Job, usable: Option<u64>) -> Self {
        match (job, usable) {
            (Job::Bulk, Some(available)) => {
                let bytes = (available / BULK_SHARE).clamp(SERVE_LIMIT_BYTES, BULK_CAP_BYTES);
                Self { setting: format!("{}MiB", bytes / MIB), reason: Reason::Share { available } }
            }
            _ => Self { setting: format!("{}MiB", SERVE_LIMIT_BYTES / MIB), reason: Reason::Ceiling },
        }
    }
}

impl fmt::Display for MemoryLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gib = |bytes: u64| bytes as f64 / GIB as f64;
        match &self.reason {
            Reason::Environment => write!(f, "memory limit {} (from {MEMORY_LIMIT_ENV})", self.setting),
            Reason::Ceiling => write!(f, "memory limit {} ({MEMORY_LIMIT_ENV} sets another)", self.setting),
            Reason::Share { available } => write!(
                f,
                "memory limit {} (a quarter of {:.1} GiB, at most {:.0} GiB; {MEMORY_LIMIT_ENV} sets another)",
                self.setting,
                gib(*available),
                gib(BULK_CAP_BYTES)
            ),
        }
    }
}

/// The bytes this process may use: the machine's memory, or its cgroup's
/// limit when that is lower; `None` where neither can be read.
fn usable_memory() -> Option<u64> {
    let machine = std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| mem_total(&text));
    let cgroup =
        std::fs::read_to_string("/sys/fs/cgroup/memory.max").ok().and_then(|t| t.trim().parse().ok());
    match (machine, cgroup) {
        (Some(m), Some(c)) => Some(m.min(c)),
        (m, c) => m.or(c),
    }
}

/// `MemTotal` of /proc/meminfo, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.trim_start_matches("MemTotal:").trim().trim_end_matches("kB").trim().parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_keeps_its_ceiling_whatever_the_machine() {
        for usable in [None, Some(GIB), Some(64 * GIB)] {
            assert_eq!(MemoryLimit::by_rule(Job::Serve, usable).setting, "512MiB");
        }
    }

    #[test]
    fn a_bulk_job_takes_a_quarter_within_floor_and_cap() {
        let setting = |usable| MemoryLimit::by_rule(Job::Bulk, usable).setting;
        assert_eq!(setting(Some(GIB)), "512MiB", "the floor");
        assert_eq!(setting(Some(3 * GIB)), "768MiB");
        assert_eq!(setting(Some(64 * GIB)), "1024MiB", "the cap");
        assert_eq!(setting(None), "512MiB", "unknown memory: the ceiling");
    }

    #[test]
    fn the_machine_memory_is_read_from_meminfo() {
        assert_eq!(mem_total("MemTotal:       24683584 kB\nMemFree: 1 kB\n"), Some(24_683_584 * 1024));
        assert_eq!(mem_total("nothing here"), None);
    }

    #[test]
    fn the_limit_says_where_it_came_from() {
        let shown = MemoryLimit::by_rule(Job::Bulk, Some(8 * GIB)).to_string();
        assert_eq!(
            shown,
            "memory limit 1024MiB (a quarter of 8.0 GiB, at most 1 GiB; ATTEMPT_LEDGER_MEMORY_LIMIT sets another)"
        );
    }
}
