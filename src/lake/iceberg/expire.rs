//! Whole days taken out of the table (`lake expire`): one delete snapshot
//! that drops every data file of a day before the horizon, then the
//! snapshots past the table's retention expired, then the files no
//! snapshot left reaches deleted, as Iceberg's own maintenance does
//! (Java's `RemoveSnapshots` with its reachable-file cleanup).
//!
//! iceberg-rust 0.10 has no delete action, and its commits can only be made
//! by its own actions: the snapshot is written here (manifests, manifest
//! list, summary) and committed by `commit.rs`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::NaiveDate;
use iceberg::spec::{
    DataContentType, FormatVersion, Literal, MAIN_BRANCH, ManifestContentType, ManifestFile,
    ManifestListWriter, ManifestWriterBuilder, Operation, PrimitiveLiteral, Snapshot, SnapshotReference,
    SnapshotRetention, Summary, Transform,
};
use iceberg::table::Table;
use iceberg::{Error, ErrorKind, TableRequirement, TableUpdate};

/// The table property that says which days were expired: every day before
/// it.
pub const EXPIRED_BEFORE_PROPERTY: &str = "attempt-ledger.expired-before";

/// What a delete snapshot takes out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Removed {
    pub files: u64,
    pub rows: u64,
    pub bytes: u64,
}

/// The commit of a delete snapshot: what it changes, what it requires of
/// the table, what it removes.
pub struct DeleteCommit {
    pub updates: Vec<TableUpdate>,
    pub requirements: Vec<TableRequirement>,
    pub removed: Removed,
}

/// The day a data file's partition holds, from the `day` field of
/// `spec`'s partition tuple.
fn day_of(partition: &iceberg::spec::Struct, day_field: usize) -> Option<NaiveDate> {
    match partition.fields().get(day_field)? {
        Some(Literal::Primitive(PrimitiveLiteral::Int(days))) => {
            NaiveDate::default().checked_add_signed(chrono::Duration::days(i64::from(*days)))
        }
        _ => None,
    }
}

/// The position of the `day` transform in a manifest's partition spec.
fn day_field(spec: &iceberg::spec::PartitionSpec) -> Result<usize, Error> {
    spec.fields().iter().position(|field| field.transform == Transform::Day).ok_or_else(|| {
        Error::new(
            ErrorKind::DataInvalid,
            format!("partition spec {} has no day field: whole days cannot be expired", spec.spec_id()),
        )
    })
}

/// A snapshot id no snapshot of `table` has.
fn new_snapshot_id(table: &Table) -> i64 {
    loop {
        let id = rand::random::<i64>() & i64::MAX;
        if id != 0 && table.metadata().snapshot_by_id(id).is_none() {
            return id;
        }
    }
}

/// The delete snapshot that removes from `table`'s current snapshot every
/// data file of a day before `before`, written (manifests and manifest
/// list) and ready to commit; `None` when the current snapshot has no such
/// file. The same commit sets `EXPIRED_BEFORE_PROPERTY`.
pub async fn delete_days(table: &Table, before: NaiveDate) -> Result<Option<DeleteCommit>, Error> {
    let metadata = table.metadata();
    if metadata.format_version() == FormatVersion::V1 {
        return Err(Error::new(
            ErrorKind::FeatureUnsupported,
            "the table is of format version 1; expire needs 2",
        ));
    }
    let Some(current) = metadata.current_snapshot() else { return Ok(None) };
    let file_io = table.file_io();
    let list = table.manifest_list_reader(current).load().await?;
    let snapshot_id = new_snapshot_id(table);
    let sequence = metadata.next_sequence_number();
    let commit_id = format!("{:032x}", rand::random::<u128>());
    let mut manifests: Vec<ManifestFile> = Vec::new();
    let mut removed = Removed::default();
    let mut changed_partitions: HashSet<String> = HashSet::new();
    for (index, manifest_file) in list.entries().iter().enumerate() {
        if manifest_file.content != ManifestContentType::Data {
            manifests.push(manifest_file.clone());
            continue;
        }
        let manifest = manifest_file.load_manifest(file_io).await?;
        let spec = manifest.metadata().partition_spec().clone();
        let field = day_field(&spec)?;
        let expired = |entry: &iceberg::spec::ManifestEntry| {
            entry.content_type() == DataContentType::Data
                && day_of(entry.data_file().partition(), field).is_some_and(|day| day < before)
        };
        if !manifest.entries().iter().any(|entry| entry.is_alive() && expired(entry)) {
            manifests.push(manifest_file.clone());
            continue;
        }
        // The manifest again, its expired files marked deleted and the
        // others existing; the entries it had marked deleted are dropped.
        let path = format!("{}/metadata/{commit_id}-m{index}.avro", metadata.location());
        let mut writer = ManifestWriterBuilder::new(
            file_io.new_output(path)?,
            Some(snapshot_id),
            manifest.metadata().schema().clone(),
            spec,
        )
        .build_v2_data();
        for entry in manifest.entries().iter().filter(|entry| entry.is_alive()) {
            let (Some(added_by), Some(data_sequence)) = (entry.snapshot_id(), entry.sequence_number()) else {
                return Err(Error::new(
                    ErrorKind::DataInvalid,
                    format!(
                        "{}: an entry without its snapshot or sequence number",
                        manifest_file.manifest_path
                    ),
                ));
            };
            let data_file = entry.data_file().clone();
            if expired(entry) {
                removed.files += 1;
                removed.rows += data_file.record_count();
                removed.bytes += data_file.file_size_in_bytes();
                changed_partitions.insert(format!("{:?}", data_file.partition()));
                writer.add_delete_file(data_file, data_sequence, entry.file_sequence_number)?;
            } else {
                writer.add_existing_file(data_file, added_by, data_sequence, entry.file_sequence_number)?;
            }
        }
        manifests.push(writer.write_manifest_file().await?);
    }
    if removed.files == 0 {
        return Ok(None);
    }
    let list_path = format!("{}/metadata/snap-{snapshot_id}-0-{commit_id}.avro", metadata.location());
    let mut list_writer = ManifestListWriter::v2(
        file_io.new_output(list_path.clone())?.writer().await?,
        snapshot_id,
        Some(current.snapshot_id()),
        sequence,
    );
    list_writer.add_manifests(manifests.into_iter())?;
    list_writer.close().await?;

    let snapshot = Snapshot::builder()
        .with_manifest_list(list_path)
        .with_snapshot_id(snapshot_id)
        .with_parent_snapshot_id(Some(current.snapshot_id()))
        .with_sequence_number(sequence)
        .with_summary(summary(current.summary(), &removed, changed_partitions.len(), before))
        .with_schema_id(metadata.current_schema_id())
        .with_timestamp_ms(chrono::Utc::now().timestamp_millis())
        .build();
    let updates = vec![
        TableUpdate::AddSnapshot { snapshot },
        TableUpdate::SetSnapshotRef {
            ref_name: MAIN_BRANCH.to_string(),
            reference: SnapshotReference::new(snapshot_id, SnapshotRetention::branch(None, None, None)),
        },
        TableUpdate::SetProperties {
            updates: HashMap::from([(EXPIRED_BEFORE_PROPERTY.to_string(), before.to_string())]),
        },
    ];
    let requirements = vec![
        TableRequirement::UuidMatch { uuid: metadata.uuid() },
        TableRequirement::RefSnapshotIdMatch {
            r#ref: MAIN_BRANCH.to_string(),
            snapshot_id: Some(current.snapshot_id()),
        },
    ];
    Ok(Some(DeleteCommit { updates, requirements, removed }))
}

/// The delete snapshot's summary: what it removed, and the table's totals
/// after it (its parent's less what it removed), as engines show them.
fn summary(parent: &Summary, removed: &Removed, partitions: usize, before: NaiveDate) -> Summary {
    let total = |key: &str| parent.additional_properties.get(key).and_then(|v| v.parse::<u64>().ok());
    let mut properties = HashMap::from([
        ("deleted-data-files".to_string(), removed.files.to_string()),
        ("deleted-records".to_string(), removed.rows.to_string()),
        ("removed-files-size".to_string(), removed.bytes.to_string()),
        ("changed-partition-count".to_string(), partitions.to_string()),
        (EXPIRED_BEFORE_PROPERTY.to_string(), before.to_string()),
    ]);
    for (key, less) in [
        ("total-data-files", removed.files),
        ("total-records", removed.rows),
        ("total-files-size", removed.bytes),
    ] {
        if let Some(value) = total(key) {
            properties.insert(key.to_string(), value.saturating_sub(less).to_string());
        }
    }
    for key in ["total-delete-files", "total-position-deletes", "total-equality-deletes"] {
        if let Some(value) = total(key) {
            properties.insert(key.to_string(), value.to_string());
        }
    }
    Summary { operation: Operation::Delete, additional_properties: properties }
}

/// The files snapshots reach: their manifest lists, their manifests, and
/// the data files live in them.
#[derive(Debug, Default)]
pub struct Reached {
    pub lists: HashSet<String>,
    pub manifests: HashSet<String>,
    pub data_files: HashSet<String>,
}

/// What `snapshot_ids` of `table` reach, each manifest read once. With
/// `deleted`, the files a manifest marks deleted count too (what an
/// expired snapshot may leave behind); without, only live ones (what a
/// kept snapshot still needs).
pub async fn reached(table: &Table, snapshot_ids: &[i64], deleted: bool) -> Result<Reached, Error> {
    let mut reached = Reached::default();
    let file_io = table.file_io();
    for id in snapshot_ids {
        let Some(snapshot) = table.metadata().snapshot_by_id(*id) else { continue };
        reached.lists.insert(snapshot.manifest_list().to_string());
        let list = table.manifest_list_reader(snapshot).load().await?;
        for manifest_file in list.entries() {
            if !reached.manifests.insert(manifest_file.manifest_path.clone()) {
                continue;
            }
            let manifest = manifest_file.load_manifest(file_io).await?;
            for entry in manifest.entries() {
                if deleted || entry.is_alive() {
                    reached.data_files.insert(entry.data_file().file_path().to_string());
                }
            }
        }
    }
    Ok(reached)
}

/// The snapshots of `table` past its retention: of the main branch's
/// ancestry, older than `max_age_ms` before `now_ms` and not among its
/// newest `keep` (the current one always kept). Snapshots outside that
/// ancestry (other branches' and tags') are left to the engine that made
/// them.
pub fn past_retention(table: &Table, now_ms: i64, max_age_ms: i64, keep: usize) -> Vec<i64> {
    let metadata = table.metadata();
    let Some(current) = metadata.current_snapshot() else { return Vec::new() };
    let mut ancestry: Vec<Arc<Snapshot>> = Vec::new();
    let mut next = Some(current.clone());
    while let Some(snapshot) = next {
        next = snapshot.parent_snapshot_id().and_then(|id| metadata.snapshot_by_id(id).cloned());
        ancestry.push(snapshot);
    }
    // Never the head of a branch or tag (iceberg-rust does not list a
    // table's refs but in its metadata's JSON).
    let heads: HashSet<i64> = serde_json::to_value(metadata)
        .ok()
        .and_then(|json| json.get("refs").and_then(|refs| refs.as_object()).cloned())
        .into_iter()
        .flatten()
        .filter_map(|(_, reference)| reference.get("snapshot-id").and_then(|id| id.as_i64()))
        .collect();
    ancestry
        .iter()
        .enumerate()
        .filter(|(position, s)| {
            *position >= keep.max(1)
                && s.timestamp_ms() < now_ms - max_age_ms
                && !heads.contains(&s.snapshot_id())
        })
        .map(|(_, s)| s.snapshot_id())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partitions_day_is_read_from_days_since_the_epoch() {
        let partition =
            iceberg::spec::Struct::from_iter([Some(Literal::date(20_000)), None, Some(Literal::string("x"))]);
        assert_eq!(day_of(&partition, 0), NaiveDate::from_ymd_opt(2024, 10, 4));
        assert_eq!(day_of(&partition, 1), None, "a null day is no day");
        assert_eq!(day_of(&partition, 2), None, "nor is a string");
        assert_eq!(day_of(&partition, 3), None, "nor a field the tuple lacks");
    }

    #[test]
    fn the_summary_takes_what_was_removed_from_the_totals() {
        let parent = Summary {
            operation: Operation::Append,
            additional_properties: HashMap::from([
                ("total-records".to_string(), "100".to_string()),
                ("total-data-files".to_string(), "10".to_string()),
                ("total-files-size".to_string(), "5000".to_string()),
                ("total-delete-files".to_string(), "0".to_string()),
            ]),
        };
        let removed = Removed { files: 4, rows: 30, bytes: 1200 };
        let day = NaiveDate::from_ymd_opt(2026, 11, 1).unwrap();
        let got = summary(&parent, &removed, 2, day);
        assert_eq!(got.operation, Operation::Delete);
        let value = |key: &str| got.additional_properties[key].as_str();
        assert_eq!(value("total-records"), "70");
        assert_eq!(value("total-data-files"), "6");
        assert_eq!(value("total-files-size"), "3800");
        assert_eq!(value("deleted-records"), "30");
        assert_eq!(value("total-delete-files"), "0");
        assert_eq!(value(EXPIRED_BEFORE_PROPERTY), "2026-11-01");
    }
}
