//! What a lake holds, file by file and node by node: which files every
//! reader can use, which none can and why, and each node's numbers with
//! their gaps (docs/lake.md, "When a lake is damaged").
//!
//! A file is good when its footer reads, it says it belongs to this lake
//! and to a node the lake knows, its columns are the manifest's, and (when
//! an export's record lists its path) the export that wrote it is the one
//! the record names. Only footers are read, never rows. `report --lake` and
//! `scripts/lake-report.py` apply the same rules and use the same words.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::nodes::{Claim, ExportState};
use super::retention::is_expired;
use super::{Lake, LakeError, io_error};
use crate::store::{ParquetFooter, Store};

/// A file no reader can use, or one an export's record lists that is gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BadFile {
    /// Relative to the lake's root.
    pub path: String,
    pub reason: String,
    /// The attempts an export's record says the file holds; `None` when no
    /// record lists it.
    pub attempts: Option<u64>,
}

/// One node's exports as the lake records them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeReport {
    pub node: String,
    /// Every database that held the node id, oldest first.
    pub claims: Vec<Claim>,
    /// Finished exports, and the attempts they hold.
    pub exports: u64,
    pub attempts: u64,
    /// The highest number any of its exports took.
    pub high: i64,
    /// Numbers no export's record covers, as inclusive ranges: a record
    /// lost, and with it what its files held.
    pub gaps: Vec<(i64, i64)>,
    /// Exports begun and not finished (in progress, or interrupted and not
    /// done again yet), as their numbers and export id.
    pub unfinished: Vec<(i64, i64, String)>,
    /// Good files of this node no finished export lists (an export in
    /// progress or interrupted wrote them).
    pub unlisted: Vec<String>,
}

/// What `survey` found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Survey {
    pub lake_id: String,
    /// Attempts files every reader can use.
    #[serde(skip)]
    pub good: Vec<PathBuf>,
    /// Price files every reader can use.
    #[serde(skip)]
    pub good_prices: Vec<PathBuf>,
    pub files: u64,
    pub bad: Vec<BadFile>,
    pub nodes: Vec<NodeReport>,
    /// Every day before it was expired (`lake expire`): its files are
    /// left out, and none of them counts as missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expired_before: Option<chrono::NaiveDate>,
    /// Files of expired days still in the lake (late attempts of them, or
    /// files a table's snapshot still reaches), left out: a reader that
    /// globs the lake's folders must read `good` instead.
    #[serde(skip)]
    pub expired_files_left_out: u64,
}

impl Survey {
    /// The files a catalog names as the table's, taken as they are: the
    /// catalog, not the lake's records, says what the table holds.
    pub fn of_files(lake_id: &str, good: Vec<PathBuf>) -> Self {
        Survey {
            lake_id: lake_id.to_string(),
            files: good.len() as u64,
            good,
            good_prices: Vec::new(),
            bad: Vec::new(),
            nodes: Vec::new(),
            expired_before: None,
            expired_files_left_out: 0,
        }
    }

    /// Anything a reader or an operator must act on: a bad or missing file,
    /// or a gap in a node's numbers.
    pub fn has_problems(&self) -> bool {
        !self.bad.is_empty() || self.nodes.iter().any(|n| !n.gaps.is_empty())
    }

    /// Attempts the records say the bad files hold, and how many bad files
    /// no record lists (whose attempts are unknown).
    pub fn skipped(&self) -> (u64, u64) {
        let known = self.bad.iter().filter_map(|b| b.attempts).sum();
        let unknown = self.bad.iter().filter(|b| b.attempts.is_none()).count() as u64;
        (known, unknown)
    }
}

/// The message that refuses a read of a lake with bad files.
pub fn refusal(lake: &str, files: &[BadFile]) -> String {
    let mut text = format!("the lake {lake} has {} files no reader can use:\n", files.len());
    for file in files {
        text.push_str(&format!("  {}: {}\n", file.path, file.reason));
    }
    text.push_str(&format!(
        "Move them out of the lake (`attempt-ledger lake check {lake}` shows the whole lake), or read \
         without them with --skip-bad-files: the report then says how many attempts' worth of files it \
         left out"
    ));
    text
}

/// Surveys the lake, whose files are in the folder `root` (its own, or a
/// copy of an object store's: `read::readable`), reading footers with
/// `store` (any connection).
pub fn survey(lake: &Lake, root: &Path, store: &Store) -> Result<Survey, LakeError> {
    let manifest = lake.manifest();
    let known: BTreeSet<String> = lake.known_nodes()?.into_iter().collect();
    let horizon = lake.horizon()?;
    let mut bad: Vec<BadFile> = Vec::new();

    // What the export records list: path -> (export id, rows), per node.
    let mut listed: HashMap<String, (String, String, u64)> = HashMap::new();
    let mut nodes = Vec::new();
    for node in &known {
        let records = match lake.export_records(node) {
            Ok(records) => records,
            Err(LakeError::Damaged { path, detail }) => {
                bad.push(BadFile {
                    path: relative(root, Path::new(&path)),
                    reason: format!("damaged record: {detail}"),
                    attempts: None,
                });
                Vec::new()
            }
            Err(other) => return Err(other),
        };
        let mut report = NodeReport {
            node: node.clone(),
            claims: lake.claims(node)?,
            exports: 0,
            attempts: 0,
            high: 0,
            gaps: Vec::new(),
            unfinished: Vec::new(),
            unlisted: Vec::new(),
        };
        let mut next = 1;
        for record in &records {
            if record.from > next {
                report.gaps.push((next, record.from - 1));
            }
            next = next.max(record.through + 1);
            report.high = report.high.max(record.through);
            match record.state {
                ExportState::Begun => {
                    report.unfinished.push((record.from, record.through, record.export_id.clone()))
                }
                ExportState::Finished => {
                    report.exports += 1;
                    report.attempts += record.attempts;
                    for file in record.files.iter().filter(|f| !is_expired(horizon, &f.path)) {
                        listed.insert(
                            format!("attempts/{}", file.path),
                            (node.clone(), record.export_id.clone(), file.rows),
                        );
                    }
                }
            }
        }
        nodes.push(report);
    }

    // Every file a reader's glob or folder walk would meet.
    let mut candidates: Vec<PathBuf> = Vec::new();
    let mut expired_files_left_out = 0;
    for path in walk(&root.join("attempts"))? {
        let rel = relative(root, &path);
        if is_expired(horizon, &rel) {
            expired_files_left_out += 1;
            continue;
        }
        match placement(&rel, manifest.buckets) {
            Ok(()) => candidates.push(path),
            Err(reason) => {
                let attempts = listed.get(&rel).map(|(_, _, rows)| *rows);
                bad.push(BadFile { path: rel, reason, attempts });
            }
        }
    }
    let footers = store.parquet_footers(&candidates);
    let expected: Vec<(String, String)> =
        manifest.schema.iter().map(|c| (c.name.clone(), c.data_type.clone())).collect();
    let required = manifest.required_columns();
    let mut good = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut node_files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (path, footer) in candidates.into_iter().zip(footers) {
        let rel = relative(root, &path);
        seen.insert(rel.clone());
        let record = listed.get(&rel);
        let verdict = footer.map_err(|e| format!("unreadable: {e}")).and_then(|footer| {
            judge(&footer, &manifest.lake_id, &known, (&expected, required), record).map(|()| footer)
        });
        match verdict {
            Ok(footer) => {
                let node = footer.metadata.get("node").cloned().unwrap_or_default();
                node_files.entry(node).or_default().push(rel);
                good.push(path);
            }
            Err(reason) => {
                bad.push(BadFile { path: rel, reason, attempts: record.map(|(_, _, rows)| *rows) })
            }
        }
    }
    for (path, (node, export_id, rows)) in &listed {
        if !seen.contains(path) && !bad.iter().any(|b| &b.path == path) {
            bad.push(BadFile {
                path: path.clone(),
                reason: format!(
                    "missing: export {export_id} of node {node} wrote it, and it is not in the lake"
                ),
                attempts: Some(*rows),
            });
        }
    }
    for report in &mut nodes {
        report.unlisted = node_files
            .remove(&report.node)
            .unwrap_or_default()
            .into_iter()
            .filter(|path| !listed.contains_key(path))
            .collect();
    }

    // Price files: each node's own, read by the engines beside the attempts.
    let mut good_prices = Vec::new();
    let price_files: Vec<PathBuf> = walk(&root.join("prices"))?;
    let price_footers = store.parquet_footers(&price_files);
    for (path, footer) in price_files.into_iter().zip(price_footers) {
        let rel = relative(root, &path);
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let verdict = match footer {
            Err(e) => Err(format!("unreadable: {e}")),
            Ok(_) if !rel.ends_with(".parquet") => Err("not a Parquet file of the lake".to_string()),
            Ok(_) if !known.contains(&stem) => Err(unknown_node(&stem)),
            Ok(footer) => match footer.metadata.get("lake_id") {
                Some(id) if id != &manifest.lake_id => Err(foreign(id, &manifest.lake_id)),
                _ => Ok(()),
            },
        };
        match verdict {
            Ok(()) => good_prices.push(path),
            Err(reason) => bad.push(BadFile { path: rel, reason, attempts: None }),
        }
    }
    bad.sort_by(|a, b| a.path.cmp(&b.path));
    good.sort();
    Ok(Survey {
        lake_id: manifest.lake_id.clone(),
        good,
        good_prices,
        files: seen.len() as u64,
        bad,
        nodes,
        expired_before: horizon,
        expired_files_left_out,
    })
}

/// Why a file of a good footer is still no file of this lake's.
fn judge(
    footer: &ParquetFooter,
    lake_id: &str,
    known: &BTreeSet<String>,
    (expected, required): (&[(String, String)], usize),
    record: Option<&(String, String, u64)>,
) -> Result<(), String> {
    match footer.metadata.get("lake_id") {
        None => {
            return Err("foreign: its footer names no lake (not written by an attempt-ledger export)".into());
        }
        Some(id) if id != lake_id => return Err(foreign(id, lake_id)),
        Some(_) => {}
    }
    let node = footer.metadata.get("node").map(String::as_str).unwrap_or_default();
    if !known.contains(node) {
        return Err(unknown_node(node));
    }
    // A file written before the lake's added columns lacks them.
    let written_before =
        (required..expected.len()).contains(&footer.columns.len()) && expected.starts_with(&footer.columns);
    if footer.columns != expected && !written_before {
        return Err(format!("wrong schema: {}", schema_difference(&footer.columns, expected)));
    }
    if let Some((_, export_id, _)) = record {
        let wrote = footer.metadata.get("export_id").map(String::as_str).unwrap_or_default();
        if wrote != export_id {
            return Err(format!(
                "replaced: export {wrote} wrote it, but the lake's record of this path names export {export_id}"
            ));
        }
    }
    Ok(())
}

fn foreign(id: &str, lake_id: &str) -> String {
    format!("foreign: written for lake {id}, not this lake ({lake_id})")
}

fn unknown_node(node: &str) -> String {
    format!("unknown node: `{node}` has no claim in this lake (_nodes/{node}/)")
}

/// The first difference between two column lists, in words.
pub(crate) fn schema_difference(found: &[(String, String)], expected: &[(String, String)]) -> String {
    for (at, want) in expected.iter().enumerate() {
        match found.get(at) {
            None => return format!("column {} ({} {}) is missing", at + 1, want.0, want.1),
            Some(got) if got != want => {
                return format!(
                    "column {} is {} {}, the manifest says {} {}",
                    at + 1,
                    got.0,
                    got.1,
                    want.0,
                    want.1
                );
            }
            Some(_) => {}
        }
    }
    format!("{} columns, the manifest has {}", found.len(), expected.len())
}

/// Where a file under `attempts/` may be: `attempts/day=YYYY-MM-DD/bucket=NN/NAME.parquet`.
fn placement(rel: &str, buckets: u32) -> Result<(), String> {
    let parts: Vec<&str> = rel.split('/').collect();
    let day_ok = |p: &str| {
        p.strip_prefix("day=").is_some_and(|d| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").is_ok())
    };
    let bucket_ok =
        |p: &str| p.strip_prefix("bucket=").and_then(|b| b.parse::<u32>().ok()).is_some_and(|b| b < buckets);
    match parts.as_slice() {
        ["attempts", day, bucket, name] if day_ok(day) && bucket_ok(bucket) => {
            if name.ends_with(".parquet") && !name.starts_with('_') {
                Ok(())
            } else {
                Err("foreign: not a Parquet file of the lake (Spark reads every file of a partition folder)"
                    .into())
            }
        }
        _ => Err(format!(
            "misplaced: not in a partition folder of this lake (attempts/day=YYYY-MM-DD/bucket=NN/, {buckets} buckets)"
        )),
    }
}

/// Every file under `dir` but hidden ones (`.name`: staged files, which
/// every reader skips), depth first; none when `dir` does not exist.
fn walk(dir: &Path) -> Result<Vec<PathBuf>, LakeError> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(io_error(dir)(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io_error(dir))?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let kind = entry.file_type().map_err(io_error(&path))?;
        if kind.is_dir() {
            out.extend(walk(&path)?);
        } else {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}
