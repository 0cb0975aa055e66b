//! Who writes a lake, and what each writer wrote (docs/lake.md, "Who writes
//! a lake").
//!
//! ```text
//! LAKE/_nodes/<node>/claim-NNNNNN.json        the database bound to the node id, by generation
//! LAKE/_nodes/<node>/exports/NNNN…NNNN.json   one export: its numbers, files and rows, by first number
//! ```
//!
//! Both are created only if absent (in a folder, a staged file hard-linked
//! into place; in an object store, a conditional write: `storage.rs`), so
//! of two writers racing for a node id, or for the same numbers, exactly
//! one wins. The claim with the
//! highest generation binds the node id; a new one is made only by a
//! database that says it replaces the bound one (`--replace-node`). An
//! export's record is created at its first number before it writes a file,
//! and rewritten, by the export that created it only and only if it is
//! unchanged, once its files are in place. The highest number any record reaches is where the node's next
//! export starts, whichever database makes it.

use serde::{Deserialize, Serialize};

use super::storage::Stored;
use super::{Lake, LakeError, to_json_bytes};

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
    fn node_dir(node: &str) -> String {
        format!("{NODES}/{node}")
    }

    fn exports_dir(node: &str) -> String {
        format!("{NODES}/{node}/exports")
    }

    fn record_key(node: &str, from: i64) -> String {
        format!("{NODES}/{node}/exports/{from:020}.json")
    }

    /// The node ids that have a claim in this lake.
    pub fn known_nodes(&self) -> Result<Vec<String>, LakeError> {
        let mut nodes: Vec<String> = self
            .storage()
            .folders(NODES)?
            .into_iter()
            .filter(|name| attempt_core::lake_names::node_id(name).is_ok())
            .collect();
        nodes.retain(|node| self.claims(node).is_ok_and(|claims| !claims.is_empty()));
        nodes.sort();
        Ok(nodes)
    }

    /// The claims of `node`, oldest first.
    pub fn claims(&self, node: &str) -> Result<Vec<Claim>, LakeError> {
        let dir = Self::node_dir(node);
        let mut claims = Vec::new();
        for (key, _) in self.named_files(&dir, "claim-", ".json")? {
            if let Some((claim, _)) = self.read_json::<Claim>(&key)? {
                claims.push(claim);
            }
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
                        lake: self.name(),
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
                    let key = format!("{}/claim-{generation:06}.json", Self::node_dir(node));
                    match self.storage().create(&key, to_json_bytes(&claim)) {
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
        for (key, _) in self.named_files(&Self::exports_dir(node), "", ".json")? {
            if let Some((record, _)) = self.read_json::<ExportRecord>(&key)? {
                records.push(record);
            }
        }
        records.sort_by_key(|r| r.from);
        Ok(records)
    }

    /// The highest number any export of `node` took, begun or finished (0
    /// before the first): the next export starts after it. Only the record
    /// with the highest first number is read.
    pub fn high(&self, node: &str) -> Result<i64, LakeError> {
        let last = self
            .named_files(&Self::exports_dir(node), "", ".json")?
            .into_iter()
            .max_by_key(|(_, from)| *from);
        match last {
            Some((key, _)) => {
                Ok(self.read_json::<ExportRecord>(&key)?.map_or(0, |(record, _)| record.through))
            }
            None => Ok(0),
        }
    }

    /// Takes the numbers of `record` for its export: `Again` when that same
    /// export took them before, an error naming the export that holds them
    /// when another did.
    pub fn begin_record(&self, record: &ExportRecord) -> Result<Begun, LakeError> {
        let key = Self::record_key(&record.node, record.from);
        match self.storage().create(&key, to_json_bytes(record)) {
            Ok(()) => Ok(Begun::New),
            Err(LakeError::Exists(path)) => {
                let Some((held, _)) = self.read_json::<ExportRecord>(&key)? else {
                    return Err(LakeError::Changed(path));
                };
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
    /// as finished, with its files, only if it is still the record read.
    pub fn finish_record(&self, record: &ExportRecord) -> Result<(), LakeError> {
        let key = Self::record_key(&record.node, record.from);
        let Some((held, seen)) = self.read_json::<ExportRecord>(&key)? else {
            return Err(LakeError::Changed(self.storage().describe(&key)));
        };
        if held.export_id != record.export_id {
            return Err(LakeError::NumbersTaken {
                node: record.node.clone(),
                from: record.from,
                export_id: held.export_id,
                database_id: held.database_id,
            });
        }
        self.storage().replace(&key, to_json_bytes(record), &seen)
    }

    fn read_json<T: for<'de> Deserialize<'de>>(&self, key: &str) -> Result<Option<(T, Stored)>, LakeError> {
        let Some(stored) = self.storage().read(key)? else { return Ok(None) };
        let value = serde_json::from_str(&stored.text)
            .map_err(|e| LakeError::Damaged { path: self.storage().describe(key), detail: e.to_string() })?;
        Ok(Some((value, stored)))
    }

    /// The files of `dir` named `prefix<digits>suffix`, as keys with the
    /// number; none when `dir` does not exist. Staged (hidden) files are
    /// not listed.
    fn named_files(&self, dir: &str, prefix: &str, suffix: &str) -> Result<Vec<(String, i64)>, LakeError> {
        let mut files = Vec::new();
        for name in self.storage().files(dir)? {
            let number = name
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix(suffix))
                .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|digits| digits.parse::<i64>().ok());
            if let Some(number) = number {
                files.push((format!("{dir}/{name}"), number));
            }
        }
        Ok(files)
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
