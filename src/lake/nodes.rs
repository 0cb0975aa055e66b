//! Who writes a lake, and what each writer wrote (docs/lake.md, "Who writes
//! a lake").
//!
//! ```text
//! LAKE/_nodes/<node>/claim-NNNNNN.json        the database bound to the node id, by generation
//! LAKE/_nodes/<node>/exports/NNNN…NNNN.json   one export: its numbers, files and rows, by first number
//! ```
//!
//! Both are created exclusively (a staged file hard-linked into place,
//! which fails when the name exists), so of two writers racing for a node
//! id, or for the same numbers, exactly one wins. The claim with the
//! highest generation binds the node id; a new one is made only by a
//! database that says it replaces the bound one (`--replace-node`). An
//! export's record is created at its first number before it writes a file,
//! and rewritten, by the export that created it only, once its files are in
//! place. The highest number any record reaches is where the node's next
//! export starts, whichever database makes it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Lake, LakeError, create_exclusive, io_error, sync_dir, write_synced};

/// The folder of the node logs.
pub const NODES: &str = "_nodes";

/// A database bound to a node id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub node: String,
    pub database_id: String,
    pub generation: u32,
    pub claimed_at: String,
    /// The database this claim took the node id from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportState {
    /// Its numbers are taken; its files may be partly written.
    Begun,
    /// Every file it lists is in place.
    Finished,
}

/// One export of a node: the lake numbers `from..=through`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportRecord {
    pub node: String,
    pub database_id: String,
    pub export_id: String,
    pub from: i64,
    pub through: i64,
    pub state: ExportState,
    pub began_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Attempts in its files (once finished).
    #[serde(default)]
    pub attempts: u64,
    #[serde(default)]
    pub files: Vec<FileEntry>,
}

/// A file an export wrote, relative to the lake's `attempts/` folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub path: String,
    pub rows: u64,
    pub bytes: u64,
}

/// This database, bound to its node id in a lake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub node: String,
    pub database_id: String,
    pub claim: Claim,
    /// The claim this database took the node id over from (`--replace-node`).
    pub replaced: Option<Claim>,
}

/// How an export's record was begun.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begun {
    /// The numbers were free and are now this export's.
    New,
    /// This export had begun them before (it is being done again).
    Again,
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl Lake {
    fn node_dir(&self, node: &str) -> PathBuf {
        self.root().join(NODES).join(node)
    }

    fn exports_dir(&self, node: &str) -> PathBuf {
        self.node_dir(node).join("exports")
    }

    fn record_path(&self, node: &str, from: i64) -> PathBuf {
        self.exports_dir(node).join(format!("{from:020}.json"))
    }

    /// The node ids that have a claim in this lake.
    pub fn known_nodes(&self) -> Result<Vec<String>, LakeError> {
        let dir = self.root().join(NODES);
        let mut nodes: Vec<String> = match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| attempt_core::lake_names::node_id(name).is_ok())
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_error(&dir)(e)),
        };
        nodes.retain(|node| self.claims(node).is_ok_and(|claims| !claims.is_empty()));
        nodes.sort();
        Ok(nodes)
    }

    /// The claims of `node`, oldest first.
    pub fn claims(&self, node: &str) -> Result<Vec<Claim>, LakeError> {
        let dir = self.node_dir(node);
        let mut claims = Vec::new();
        for (path, _) in named_files(&dir, "claim-", ".json")? {
            claims.push(read_json::<Claim>(&path)?);
        }
        claims.sort_by_key(|c| c.generation);
        Ok(claims)
    }

    /// Binds `node` to the database `database_id`: the claim it holds, or a
    /// new one if none is made yet (or, with `replace`, over another
    /// database's). Another database's claim without `replace` is refused,
    /// naming both databases and what to do.
    pub fn bind(&self, node: &str, database_id: &str, replace: bool) -> Result<Binding, LakeError> {
        // Racing binders: whoever links a generation's file first has it;
        // the loser reads again and sees who won.
        for _ in 0..8 {
            let claims = self.claims(node)?;
            let current = claims.last().cloned();
            match current {
                Some(claim) if claim.database_id == database_id => {
                    let replaced = claim
                        .replaces
                        .as_ref()
                        .and_then(|old| claims.iter().rev().find(|c| &c.database_id == old).cloned());
                    return Ok(Binding {
                        node: node.to_string(),
                        database_id: database_id.to_string(),
                        claim,
                        replaced,
                    });
                }
                Some(claim) if !replace => {
                    return Err(LakeError::NodeTaken(Box::new(super::NodeTaken {
                        lake: self.root().display().to_string(),
                        node: node.to_string(),
                        holder: claim.database_id,
                        claimed_at: claim.claimed_at,
                        database: database_id.to_string(),
                    })));
                }
                current => {
                    let generation = current.as_ref().map_or(1, |c| c.generation + 1);
                    let claim = Claim {
                        node: node.to_string(),
                        database_id: database_id.to_string(),
                        generation,
                        claimed_at: now(),
                        replaces: current.map(|c| c.database_id),
                    };
                    let path = self.node_dir(node).join(format!("claim-{generation:06}.json"));
                    match create_exclusive(&path, &to_json(&claim)) {
                        // Another database linked this generation first.
                        Ok(()) | Err(LakeError::Exists(_)) => {}
                        Err(other) => return Err(other),
                    }
                }
            }
        }
        Err(LakeError::Contended { what: format!("the claim of node {node}") })
    }

    /// Every export record of `node`, by first number.
    pub fn export_records(&self, node: &str) -> Result<Vec<ExportRecord>, LakeError> {
        let mut records = Vec::new();
        for (path, _) in named_files(&self.exports_dir(node), "", ".json")? {
            records.push(read_json::<ExportRecord>(&path)?);
        }
        records.sort_by_key(|r| r.from);
        Ok(records)
    }

    /// The highest number any export of `node` took, begun or finished (0
    /// before the first): the next export starts after it. Only the record
    /// with the highest first number is read.
    pub fn high(&self, node: &str) -> Result<i64, LakeError> {
        let last =
            named_files(&self.exports_dir(node), "", ".json")?.into_iter().max_by_key(|(_, from)| *from);
        match last {
            Some((path, _)) => Ok(read_json::<ExportRecord>(&path)?.through),
            None => Ok(0),
        }
    }

    /// Takes the numbers of `record` for its export: `Again` when that same
    /// export took them before, an error naming the export that holds them
    /// when another did.
    pub fn begin_record(&self, record: &ExportRecord) -> Result<Begun, LakeError> {
        let path = self.record_path(&record.node, record.from);
        match create_exclusive(&path, &to_json(record)) {
            Ok(()) => Ok(Begun::New),
            Err(LakeError::Exists(_)) => {
                let held = read_json::<ExportRecord>(&path)?;
                if held.export_id == record.export_id {
                    Ok(Begun::Again)
                } else {
                    Err(LakeError::NumbersTaken {
                        node: record.node.clone(),
                        from: record.from,
                        export_id: held.export_id,
                        database_id: held.database_id,
                    })
                }
            }
            Err(other) => Err(other),
        }
    }

    /// Rewrites the record of an export this process began (`begin_record`)
    /// as finished, with its files.
    pub fn finish_record(&self, record: &ExportRecord) -> Result<(), LakeError> {
        let path = self.record_path(&record.node, record.from);
        let held = read_json::<ExportRecord>(&path)?;
        if held.export_id != record.export_id {
            return Err(LakeError::NumbersTaken {
                node: record.node.clone(),
                from: record.from,
                export_id: held.export_id,
                database_id: held.database_id,
            });
        }
        let staged = staged_beside(&path, &record.export_id);
        write_synced(&staged, &to_json(record))?;
        std::fs::rename(&staged, &path).map_err(io_error(&path))?;
        sync_dir(path.parent());
        super::remove_staged_copies(&path);
        Ok(())
    }
}

impl ExportRecord {
    /// A new record of an export begun now.
    pub fn begun(node: &str, database_id: &str, export_id: &str, from: i64, through: i64) -> ExportRecord {
        ExportRecord {
            node: node.to_string(),
            database_id: database_id.to_string(),
            export_id: export_id.to_string(),
            from,
            through,
            state: ExportState::Begun,
            began_at: now(),
            finished_at: None,
            attempts: 0,
            files: Vec::new(),
        }
    }

    pub fn finished(mut self, attempts: u64, files: Vec<FileEntry>) -> Self {
        self.state = ExportState::Finished;
        self.finished_at = Some(now());
        self.attempts = attempts;
        self.files = files;
        self
    }
}

fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    // A struct of strings and numbers always serializes.
    let mut text = serde_json::to_vec_pretty(value).unwrap_or_default();
    text.push(b'\n');
    text
}

fn staged_beside(path: &Path, tag: &str) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{tag}.{}.tmp", std::process::id()))
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, LakeError> {
    let text = super::read_small(path)?;
    serde_json::from_str(&text)
        .map_err(|e| LakeError::Damaged { path: path.display().to_string(), detail: e.to_string() })
}

/// The files of `dir` named `prefix<digits>suffix`, with the number; none
/// when `dir` does not exist. Staged (hidden) files are not listed.
fn named_files(dir: &Path, prefix: &str, suffix: &str) -> Result<Vec<(PathBuf, i64)>, LakeError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(dir)(e)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_error(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let number = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix(suffix))
            .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|digits| digits.parse::<i64>().ok());
        if let Some(number) = number {
            files.push((entry.path(), number));
        }
    }
    Ok(files)
}
