//! Where a lake lives: a folder (local, NFS) or a prefix of an object store
//! (S3 and what speaks its API, Google Cloud Storage, Azure Blob Storage),
//! and the few writes the lake's rules need of either (docs/lake.md,
//! "Object stores"):
//!
//! - **create-if-absent** (`create`, `place`): the claims, the export
//!   records and the attempts files. A folder links a staged file to its
//!   name, which fails when the name exists; an object store refuses a
//!   write with `If-None-Match: *` (or its own precondition) to a name
//!   that exists.
//! - **update-if-unchanged** (`replace`): an export's record once its files
//!   are in place, and the manifest grown by added columns. An object
//!   store refuses the write (`If-Match`) when the object changed since it
//!   was read; a folder renames a staged file over it, its one writer
//!   having checked it first.
//!
//! A writer proves at start that the store enforces both (`prove`): two
//! racing creates of one name, exactly one winner, and an update against a
//! stale version refused. A store that does not is refused, named.
//!
//! The lake's code is synchronous (DuckDB writes and reads its files); an
//! object store is called on a small runtime of its own.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutPayload, UpdateVersion};

use super::{LakeError, MAX_JSON_BYTES, io_error, random_id};

/// Downloads a reader runs at once when it copies a lake from an object
/// store: each streams to the disk, so memory holds a few chunks each.
const DOWNLOADS_AT_ONCE: usize = 8;

/// Where a writer's start-up proof of conditional writes puts (and then
/// deletes) its probe object.
const PROBES: &str = "_probe";

/// A lake's location as the user wrote it: a folder, or an object store's
/// URL (`s3://bucket/prefix`, `gs://`, `az://`; `file://` is a folder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Folder(PathBuf),
    Objects(url::Url),
}

impl Location {
    /// `--lake`'s value, checked when the flags are read: a URL of a known
    /// scheme, or a folder.
    pub fn parse(text: &str) -> Result<Self, String> {
        if !text.contains("://") {
            if text.is_empty() {
                return Err("the lake's location is empty".into());
            }
            return Ok(Self::Folder(PathBuf::from(text)));
        }
        let url = url::Url::parse(text).map_err(|e| format!("`{text}` is not a URL: {e}"))?;
        match url.scheme() {
            "file" => url
                .to_file_path()
                .map(Self::Folder)
                .map_err(|()| format!("`{text}` is not a local path (file:///absolute/path)")),
            "s3" | "s3a" | "gs" | "az" | "abfs" | "abfss" => {
                if url.host_str().is_none_or(str::is_empty) {
                    return Err(format!(
                        "`{text}` names no bucket or container ({}://BUCKET/PREFIX)",
                        url.scheme()
                    ));
                }
                ObjectPath::from_url_path(url.path())
                    .map_err(|e| format!("`{text}`: its prefix is not a key: {e}"))?;
                Ok(Self::Objects(url))
            }
            other => Err(format!(
                "`{other}://` is not a lake location this attempt-ledger writes: a folder, file://, s3://, \
                 gs:// or az://"
            )),
        }
    }

    /// Folder locations, for the commands that read a folder only.
    pub fn folder(&self) -> Option<&Path> {
        match self {
            Self::Folder(path) => Some(path),
            Self::Objects(_) => None,
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Folder(path) => write!(f, "{}", path.display()),
            Self::Objects(url) => write!(f, "{url}"),
        }
    }
}

/// What was read of a small object, and the version a `replace` of it
/// must find still there.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub text: String,
    version: Option<UpdateVersion>,
}

/// A lake's files, in a folder or under an object store's prefix; every
/// name (`key`) is relative to the lake's root, `/`-separated.
#[derive(Debug, Clone)]
pub(crate) enum Storage {
    Folder(PathBuf),
    Objects(Arc<Objects>),
}

pub(crate) struct Objects {
    url: url::Url,
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    runtime: OwnRuntime,
}

impl std::fmt::Debug for Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Objects").field("url", &self.url.as_str()).finish_non_exhaustive()
    }
}

/// A current-thread runtime, shut down without waiting when dropped (a
/// runtime dropped on an async thread would panic otherwise).
struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl Storage {
    /// The storage at `location`; an object store is configured from the
    /// standard variables of its platform (`AWS_*`, `GOOGLE_*`, `AZURE_*`,
    /// docs/lake.md), nothing is read or written yet.
    pub fn at(location: &Location) -> Result<Self, LakeError> {
        let url = match location {
            Location::Folder(path) => return Ok(Self::Folder(path.clone())),
            Location::Objects(url) => url,
        };
        let unusable = |detail: String| LakeError::Unusable { store: url.to_string(), detail };
        // reqwest's rustls is built without a provider of its own: ring,
        // the one the listeners use. Installed once per process.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let store: Arc<dyn ObjectStore> = match url.scheme() {
            "s3" | "s3a" => Arc::new(
                object_store::aws::AmazonS3Builder::from_env()
                    .with_bucket_name(url.host_str().unwrap_or_default())
                    .build()
                    .map_err(|e| unusable(e.to_string()))?,
            ),
            "gs" => Arc::new(
                object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_bucket_name(url.host_str().unwrap_or_default())
                    .build()
                    .map_err(|e| unusable(e.to_string()))?,
            ),
            _ => Arc::new(
                object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_url(url.as_str())
                    .build()
                    .map_err(|e| unusable(e.to_string()))?,
            ),
        };
        let prefix = ObjectPath::from_url_path(url.path()).map_err(|e| unusable(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("lake-store")
            .build()
            .map_err(|e| unusable(format!("cannot start its client: {e}")))?;
        Ok(Self::Objects(Arc::new(Objects {
            url: url.clone(),
            store,
            prefix,
            runtime: OwnRuntime(Some(runtime)),
        })))
    }

    /// How messages name this lake: its folder or its URL.
    pub fn name(&self) -> String {
        match self {
            Self::Folder(root) => root.display().to_string(),
            Self::Objects(objects) => objects.url.to_string(),
        }
    }

    /// How messages name one of its files.
    pub fn describe(&self, key: &str) -> String {
        match self {
            Self::Folder(root) => root.join(key).display().to_string(),
            Self::Objects(objects) => format!("{}/{key}", objects.url.as_str().trim_end_matches('/')),
        }
    }

    /// The absolute URI of one of its files, as an Iceberg table records
    /// it: `file:///folder/key`, or `s3://bucket/prefix/key`.
    pub fn uri(&self, key: &str) -> String {
        match self {
            Self::Folder(root) => format!(
                "file://{}",
                std::path::absolute(root.join(key)).unwrap_or_else(|_| root.join(key)).display()
            ),
            Self::Objects(objects) => format!("{}/{key}", objects.url.as_str().trim_end_matches('/')),
        }
    }

    /// The size of `key`, or `None` when there is no such file.
    pub fn size(&self, key: &str) -> Result<Option<u64>, LakeError> {
        match self {
            Self::Folder(root) => match std::fs::metadata(root.join(key)) {
                Ok(meta) => Ok(Some(meta.len())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(io_error(&root.join(key))(e)),
            },
            Self::Objects(objects) => match objects.run(objects.store.head(&objects.path(key))) {
                Ok(meta) => Ok(Some(meta.size)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(source) => Err(objects.error(key, source)),
            },
        }
    }

    /// An object store's client for its whole bucket, and the
    /// `scheme://bucket` its keys are under; `None` for a folder.
    #[cfg(feature = "iceberg")]
    pub fn bucket_store(&self) -> Option<(Arc<dyn ObjectStore>, String)> {
        match self {
            Self::Folder(_) => None,
            Self::Objects(objects) => Some((
                objects.store.clone(),
                format!("{}://{}", objects.url.scheme(), objects.url.host_str().unwrap_or_default()),
            )),
        }
    }

    /// Refuses a file where the lake's folder should be.
    pub fn check(&self) -> Result<(), LakeError> {
        if let Self::Folder(root) = self
            && std::fs::metadata(root).is_ok_and(|meta| !meta.is_dir())
        {
            return Err(LakeError::NotAFolder(root.display().to_string()));
        }
        Ok(())
    }

    /// Creates `key` holding `bytes` unless it exists (`LakeError::Exists`).
    pub fn create(&self, key: &str, bytes: Vec<u8>) -> Result<(), LakeError> {
        match self {
            Self::Folder(root) => create_exclusive(&root.join(key), &bytes),
            Self::Objects(objects) => {
                let path = objects.path(key);
                match objects.run(objects.store.put_opts(
                    &path,
                    PutPayload::from(bytes),
                    PutMode::Create.into(),
                )) {
                    Ok(_) => Ok(()),
                    Err(object_store::Error::AlreadyExists { .. }) => {
                        Err(LakeError::Exists(self.describe(key)))
                    }
                    Err(source) => Err(objects.error(key, source)),
                }
            }
        }
    }

    /// The text of the small file `key` (refused past `MAX_JSON_BYTES`),
    /// or `None` when there is none.
    pub fn read(&self, key: &str) -> Result<Option<Stored>, LakeError> {
        match self {
            Self::Folder(root) => match read_small(&root.join(key)) {
                Ok(text) => Ok(Some(Stored { text, version: None })),
                Err(LakeError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                    Ok(None)
                }
                Err(other) => Err(other),
            },
            Self::Objects(objects) => {
                let path = objects.path(key);
                let got = objects.run(async {
                    let got = objects.store.get(&path).await?;
                    if got.meta.size > MAX_JSON_BYTES {
                        return Ok(Err(got.meta.size));
                    }
                    let version =
                        UpdateVersion { e_tag: got.meta.e_tag.clone(), version: got.meta.version.clone() };
                    Ok::<_, object_store::Error>(Ok((got.bytes().await?, version)))
                });
                match got {
                    Ok(Ok((bytes, version))) => {
                        let text = String::from_utf8(bytes.to_vec()).map_err(|e| LakeError::Damaged {
                            path: self.describe(key),
                            detail: e.to_string(),
                        })?;
                        Ok(Some(Stored { text, version: Some(version) }))
                    }
                    Ok(Err(_)) => {
                        Err(LakeError::TooLarge { path: self.describe(key), limit: MAX_JSON_BYTES })
                    }
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(source) => Err(objects.error(key, source)),
                }
            }
        }
    }

    /// Replaces `key`, read as `seen`, with `bytes`, unless it changed
    /// since (`LakeError::Changed`).
    pub fn replace(&self, key: &str, bytes: Vec<u8>, seen: &Stored) -> Result<(), LakeError> {
        match self {
            Self::Folder(root) => {
                let path = root.join(key);
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let staged =
                    path.with_file_name(format!(".{name}.{}.{}.tmp", std::process::id(), random_id("s")));
                write_synced(&staged, &bytes)?;
                std::fs::rename(&staged, &path).map_err(io_error(&path))?;
                sync_dir(path.parent());
                remove_staged_copies(&path);
                Ok(())
            }
            Self::Objects(objects) => {
                let path = objects.path(key);
                let mode = match &seen.version {
                    Some(version) => PutMode::Update(version.clone()),
                    None => PutMode::Create,
                };
                match objects.run(objects.store.put_opts(&path, PutPayload::from(bytes), mode.into())) {
                    Ok(_) => Ok(()),
                    Err(
                        object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. },
                    ) => Err(LakeError::Changed(self.describe(key))),
                    Err(source) => Err(objects.error(key, source)),
                }
            }
        }
    }

    /// Deletes `key`; one already gone is no error.
    pub fn remove(&self, key: &str) -> Result<(), LakeError> {
        match self {
            Self::Folder(root) => {
                let path = root.join(key);
                match std::fs::remove_file(&path) {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(e) => Err(io_error(&path)(e)),
                }
            }
            Self::Objects(objects) => match objects.run(objects.store.delete(&objects.path(key))) {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(source) => Err(objects.error(key, source)),
            },
        }
    }

    /// Removes the folder `dir` if it is empty (an object store has no
    /// folders of its own to remove).
    pub fn remove_folder(&self, dir: &str) {
        if let Self::Folder(root) = self {
            let _ = std::fs::remove_dir(root.join(dir));
        }
    }

    /// The names of the folders (common prefixes) directly under `dir`.
    pub fn folders(&self, dir: &str) -> Result<Vec<String>, LakeError> {
        Ok(self.children(dir)?.0)
    }

    /// The names of the files directly under `dir`, hidden (staged) ones
    /// left out.
    pub fn files(&self, dir: &str) -> Result<Vec<String>, LakeError> {
        Ok(self.children(dir)?.1)
    }

    fn children(&self, dir: &str) -> Result<(Vec<String>, Vec<String>), LakeError> {
        let (mut folders, mut files) = (Vec::new(), Vec::new());
        match self {
            Self::Folder(root) => {
                let path = root.join(dir);
                let entries = match std::fs::read_dir(&path) {
                    Ok(entries) => entries,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((folders, files)),
                    Err(e) => return Err(io_error(&path)(e)),
                };
                for entry in entries {
                    let entry = entry.map_err(io_error(&path))?;
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if entry.path().is_dir() {
                        folders.push(name);
                    } else if !name.starts_with('.') {
                        files.push(name);
                    }
                }
            }
            Self::Objects(objects) => {
                let path = objects.path(dir);
                let listed = objects
                    .run(objects.store.list_with_delimiter(Some(&path)))
                    .map_err(|e| objects.error(dir, e))?;
                folders.extend(listed.common_prefixes.iter().filter_map(|p| p.filename().map(String::from)));
                files.extend(
                    listed
                        .objects
                        .iter()
                        .filter_map(|o| o.location.filename())
                        .filter(|n| !n.starts_with('.'))
                        .map(String::from),
                );
            }
        }
        folders.sort();
        files.sort();
        Ok((folders, files))
    }

    /// Where a file for `key` is written before it is placed: beside it in
    /// a folder (hidden, so no reader's glob takes it), in `scratch` for
    /// an object store.
    pub fn staging_path(&self, key: &str, scratch: &Path) -> Result<PathBuf, LakeError> {
        let name = key.rsplit('/').next().unwrap_or(key);
        let path = match self {
            Self::Folder(root) => root.join(key).with_file_name(format!(".{name}.tmp")),
            Self::Objects(_) => scratch.join(key.replace('/', "#")),
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        }
        Ok(path)
    }

    /// Puts the file `staged` at `key` unless another writer's file is
    /// there: created when the name is free; put over a file whose writer
    /// (`written_by`, its footer's export id) is `export_id`, the same
    /// export done again after a crash. Returns its size; `staged` is gone.
    pub fn place(
        &self,
        key: &str,
        staged: &Path,
        export_id: &str,
        written_by: impl Fn(&Path) -> Option<String>,
    ) -> Result<u64, LakeError> {
        let placed = self.place_staged(key, staged, export_id, &written_by);
        let _ = std::fs::remove_file(staged);
        placed
    }

    fn place_staged(
        &self,
        key: &str,
        staged: &Path,
        export_id: &str,
        written_by: &impl Fn(&Path) -> Option<String>,
    ) -> Result<u64, LakeError> {
        let size = flush(staged)?;
        let taken = |by: Option<String>| LakeError::FileTaken {
            path: self.describe(key),
            by: by.unwrap_or_else(|| "no attempt-ledger export (it has no export id)".to_string()),
        };
        match self {
            Self::Folder(root) => {
                let path = root.join(key);
                match std::fs::hard_link(staged, &path) {
                    Ok(()) => Ok(size),
                    // A file system without hard links: a rename, after the same check.
                    Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists && !path.exists() => {
                        std::fs::rename(staged, &path).map_err(io_error(&path)).map(|()| size)
                    }
                    Err(_) => match written_by(&path) {
                        Some(id) if id == export_id => {
                            std::fs::rename(staged, &path).map_err(io_error(&path)).map(|()| size)
                        }
                        other => Err(taken(other)),
                    },
                }
            }
            Self::Objects(objects) => {
                let bytes = std::fs::read(staged).map_err(io_error(staged))?;
                let path = objects.path(key);
                let payload = PutPayload::from(bytes);
                match objects.run(objects.store.put_opts(&path, payload.clone(), PutMode::Create.into())) {
                    Ok(_) => return Ok(size),
                    Err(object_store::Error::AlreadyExists { .. }) => {}
                    Err(source) => return Err(objects.error(key, source)),
                }
                // Whose is the object there? Its footer says.
                let there = staged.with_extension("there");
                let version = self.download(key, &there)?;
                let by = written_by(&there);
                let _ = std::fs::remove_file(&there);
                match (by, version) {
                    (Some(id), Some(version)) if id == export_id => {
                        match objects.run(objects.store.put_opts(
                            &path,
                            payload,
                            PutMode::Update(version).into(),
                        )) {
                            Ok(_) => Ok(size),
                            Err(object_store::Error::Precondition { .. }) => {
                                Err(LakeError::Changed(self.describe(key)))
                            }
                            Err(source) => Err(objects.error(key, source)),
                        }
                    }
                    (by, _) => Err(taken(by)),
                }
            }
        }
    }

    /// Puts the file `staged` at `key`, over whatever is there (a node's
    /// own prices, newest wins). `staged` is gone.
    pub fn put_over(&self, key: &str, staged: &Path) -> Result<(), LakeError> {
        let result = match self {
            Self::Folder(root) => {
                let path = root.join(key);
                flush(staged).and_then(|_| std::fs::rename(staged, &path).map_err(io_error(&path)))
            }
            Self::Objects(objects) => std::fs::read(staged).map_err(io_error(staged)).and_then(|bytes| {
                objects
                    .run(objects.store.put(&objects.path(key), PutPayload::from(bytes)))
                    .map(|_| ())
                    .map_err(|e| objects.error(key, e))
            }),
        };
        let _ = std::fs::remove_file(staged);
        result
    }

    /// Makes what was placed in `dirs` durable (a folder's entries; an
    /// object store's writes are durable when acknowledged).
    pub fn sync(&self, dirs: &[String]) {
        if let Self::Folder(root) = self {
            for dir in dirs {
                sync_dir(Some(&root.join(dir)));
            }
        }
    }

    /// Copies the object `key` to the local file `to`; its version, or
    /// `None` when there is no such object.
    fn download(&self, key: &str, to: &Path) -> Result<Option<UpdateVersion>, LakeError> {
        let Self::Objects(objects) = self else { return Ok(None) };
        match objects.run(objects.fetch(objects.path(key), to.to_path_buf())) {
            Ok(version) => Ok(Some(version)),
            Err(Fetch::Store(object_store::Error::NotFound { .. })) => Ok(None),
            Err(Fetch::Store(source)) => Err(objects.error(key, source)),
            Err(Fetch::Io(source)) => Err(LakeError::Io { path: to.display().to_string(), source }),
        }
    }

    /// Copies every file of the lake (hidden, staged ones left out) into
    /// the folder `to`, under the same names, for the readers that read a
    /// folder (DuckDB reads the files' footers and rows from the disk).
    /// Returns the files and bytes copied. A folder lake is not copied.
    ///
    /// The manifest and the node records are listed and copied first, the
    /// data files after: an export finishes its record only once its files
    /// are in place, so every file a copied finished record lists is in the
    /// second listing, whatever exports run meanwhile.
    pub fn copy_into(&self, to: &Path) -> Result<(u64, u64), LakeError> {
        let Self::Objects(objects) = self else { return Ok((0, 0)) };
        let (mut files, mut bytes) = (0, 0);
        for records in [true, false] {
            let listed: Vec<object_store::ObjectMeta> = objects
                .run(objects.store.list(Some(&objects.prefix)).try_collect::<Vec<_>>())
                .map_err(|e| objects.error("", e))?;
            let wanted: Vec<(ObjectPath, PathBuf, u64)> = listed
                .into_iter()
                .filter_map(|meta| {
                    let parts: Vec<String> = meta
                        .location
                        .prefix_match(&objects.prefix)?
                        .map(|p| p.as_ref().to_string())
                        .collect();
                    let is_record = parts.first().is_some_and(|p| p.starts_with('_'));
                    let hidden = parts.iter().any(|p| p.starts_with('.'))
                        || parts.first().is_some_and(|p| p == PROBES);
                    if parts.is_empty() || is_record != records || hidden {
                        return None;
                    }
                    let local = parts.iter().fold(to.to_path_buf(), |path, part| path.join(part));
                    Some((meta.location, local, meta.size))
                })
                .collect();
            bytes += wanted.iter().map(|(_, _, size)| size).sum::<u64>();
            files += wanted.len() as u64;
            let copied = objects.run(
                futures::stream::iter(wanted.into_iter().map(|(path, local, _)| objects.fetch(path, local)))
                    .buffer_unordered(DOWNLOADS_AT_ONCE)
                    .try_collect::<Vec<_>>(),
            );
            match copied {
                Ok(_) => {}
                Err(Fetch::Store(source)) => return Err(objects.error("", source)),
                Err(Fetch::Io(source)) => {
                    return Err(LakeError::Io { path: to.display().to_string(), source });
                }
            }
        }
        Ok((files, bytes))
    }

    /// Proves that the store enforces create-if-absent and
    /// update-if-unchanged: two racing creates of one name have exactly one
    /// winner, and an update against a stale version is refused. A store
    /// that does not is refused (`LakeError::Unconditional`), named.
    pub fn prove(&self) -> Result<(), LakeError> {
        self.check()?;
        let key = format!("{PROBES}/{}.json", random_id("probe"));
        let failed = |detail: String| LakeError::Unconditional { store: self.name(), detail };
        match self {
            Self::Folder(root) => {
                remove_staged_probes(&root.join(PROBES));
                let path = root.join(&key);
                let (a, b) = std::thread::scope(|scope| {
                    let a = scope.spawn(|| create_exclusive(&path, b"a"));
                    let b = create_exclusive(&path, b"b");
                    (a.join(), b)
                });
                let a = a.unwrap_or_else(|_| Err(LakeError::Contended { what: "the probe".into() }));
                let outcome = match (a, b) {
                    (Ok(()), Err(LakeError::Exists(_))) | (Err(LakeError::Exists(_)), Ok(())) => Ok(()),
                    (Ok(()), Ok(())) => {
                        Err(failed("two exclusive creates of one file both succeeded".into()))
                    }
                    (Err(e), _) | (_, Err(e)) => Err(e),
                };
                let _ = std::fs::remove_file(&path);
                let _ = std::fs::remove_dir(root.join(PROBES));
                outcome
            }
            Self::Objects(objects) => {
                let path = objects.path(&key);
                let outcome = objects.run(objects.prove(&path));
                let _ = objects.run(objects.store.delete(&path));
                outcome.map_err(failed)
            }
        }
    }
}

enum Fetch {
    Store(object_store::Error),
    Io(std::io::Error),
}

impl Objects {
    fn path(&self, key: &str) -> ObjectPath {
        self.prefix.parts().chain(ObjectPath::from(key).parts().collect::<Vec<_>>()).collect()
    }

    fn error(&self, key: &str, source: object_store::Error) -> LakeError {
        LakeError::Object {
            path: format!("{}/{key}", self.url.as_str().trim_end_matches('/')),
            source: Box::new(source),
        }
    }

    /// Runs `future` on this store's runtime, from any thread: on a thread
    /// of another runtime (a command's async setup) from a scoped thread
    /// of its own, since a runtime cannot block inside another.
    fn run<F>(&self, future: F) -> F::Output
    where
        F: std::future::Future + Send,
        F::Output: Send,
    {
        let runtime = self.runtime.0.as_ref().expect("the runtime is taken only when the store is dropped");
        if tokio::runtime::Handle::try_current().is_err() {
            return runtime.block_on(future);
        }
        std::thread::scope(|scope| match scope.spawn(|| runtime.block_on(future)).join() {
            Ok(output) => output,
            Err(panic) => std::panic::resume_unwind(panic),
        })
    }

    /// Streams the object at `path` to the local file `to`; its version.
    async fn fetch(&self, path: ObjectPath, to: PathBuf) -> Result<UpdateVersion, Fetch> {
        let got = self.store.get(&path).await.map_err(Fetch::Store)?;
        let version = UpdateVersion { e_tag: got.meta.e_tag.clone(), version: got.meta.version.clone() };
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(Fetch::Io)?;
        }
        let mut file = std::io::BufWriter::new(std::fs::File::create(&to).map_err(Fetch::Io)?);
        let mut chunks = got.into_stream();
        while let Some(chunk) = chunks.next().await {
            file.write_all(&chunk.map_err(Fetch::Store)?).map_err(Fetch::Io)?;
        }
        file.flush().map_err(Fetch::Io)?;
        Ok(version)
    }

    async fn prove(&self, path: &ObjectPath) -> Result<(), String> {
        let create = |body: &'static [u8]| {
            self.store.put_opts(path, PutPayload::from_static(body), PutMode::Create.into())
        };
        let (a, b) = tokio::join!(create(b"a"), create(b"b"));
        use object_store::Error::{AlreadyExists, Precondition};
        let won = match (a, b) {
            (Ok(won), Err(AlreadyExists { .. })) | (Err(AlreadyExists { .. }), Ok(won)) => won,
            (Ok(_), Ok(_)) => {
                return Err(
                    "two racing create-if-absent writes (If-None-Match: *) of one name both succeeded: \
                            it does not refuse a write to a name that exists"
                        .into(),
                );
            }
            (Err(e), _) | (_, Err(e)) => return Err(format!("a create-if-absent write failed: {e}")),
        };
        let stale = UpdateVersion {
            e_tag: won.e_tag.as_ref().map(|_| "\"attempt-ledger-stale\"".to_string()),
            version: won.version.as_ref().map(|_| "1".to_string()),
        };
        match self.store.put_opts(path, PutPayload::from_static(b"c"), PutMode::Update(stale).into()).await {
            Err(Precondition { .. }) => {}
            Ok(_) => {
                return Err("an update-if-unchanged write (If-Match) against a version the object does not \
                            have succeeded: it does not check the version"
                    .into());
            }
            Err(e) => return Err(format!("an update-if-unchanged write failed: {e}")),
        }
        let current = UpdateVersion::from(won);
        self.store
            .put_opts(path, PutPayload::from_static(b"d"), PutMode::Update(current).into())
            .await
            .map(|_| ())
            .map_err(|e| format!("an update-if-unchanged write of the current version failed: {e}"))
    }
}

/// A lake's own JSON file as text, refused past `MAX_JSON_BYTES` (a
/// replaced or linked file is never read whole into memory).
fn read_small(path: &Path) -> Result<String, LakeError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(io_error(path))?;
    let mut text = String::new();
    file.take(MAX_JSON_BYTES + 1).read_to_string(&mut text).map_err(io_error(path))?;
    if text.len() as u64 > MAX_JSON_BYTES {
        return Err(LakeError::TooLarge { path: path.display().to_string(), limit: MAX_JSON_BYTES });
    }
    Ok(text)
}

/// Removes what writers of `path` killed between staging it and placing it
/// left beside it (`.NAME.*.tmp`). Called once `path` is in place, when
/// every such copy is useless: a writer still alive whose staged copy is
/// gone fails to place it the way it would have anyway (the name exists).
fn remove_staged_copies(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { return };
    let prefix = format!(".{}.", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let file = file.to_string_lossy();
        if file.starts_with(&prefix) && file.ends_with(".tmp") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Creates `path` holding `bytes`, whole, unless a file is there already
/// (`LakeError::Exists`): written under a staged name, flushed, then
/// hard-linked to its name, which fails when the name exists. Where the
/// file system has no hard links, a create-new open does the same (a
/// crash can then leave the file partly written, which its reader names).
/// Removes the staged copies a killed proof left in `dir`. One of a proof
/// running now may go too: its link then fails and its create falls back
/// to an exclusive open of the probe's name, as exclusive as the link.
fn remove_staged_probes(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name.ends_with(".tmp") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn create_exclusive(path: &Path, bytes: &[u8]) -> Result<(), LakeError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let staged = dir.join(format!(".{name}.{}.{}.tmp", std::process::id(), random_id("s")));
    write_synced(&staged, bytes)?;
    let linked = std::fs::hard_link(&staged, path);
    let _ = std::fs::remove_file(&staged);
    match linked {
        Ok(()) => remove_staged_copies(path),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            remove_staged_copies(path);
            return Err(LakeError::Exists(path.display().to_string()));
        }
        Err(_) => {
            let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).open(path) {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Err(LakeError::Exists(path.display().to_string()));
                }
                Err(e) => return Err(io_error(path)(e)),
            };
            file.write_all(bytes).and_then(|_| file.sync_all()).map_err(io_error(path))?;
        }
    }
    sync_dir(Some(dir));
    Ok(())
}

/// Makes the entries of `dir` durable; a file system that cannot sync a
/// directory (some network mounts) has them durable already or never.
fn sync_dir(dir: Option<&Path>) {
    if let Some(handle) = dir.and_then(|d| std::fs::File::open(d).ok()) {
        let _ = handle.sync_all();
    }
}

/// Writes `bytes` to `path` and flushes them to the disk.
fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), LakeError> {
    let mut file = std::fs::File::create(path).map_err(io_error(path))?;
    file.write_all(bytes).and_then(|_| file.sync_all()).map_err(io_error(path))
}

/// Flushes `path` to the disk; returns its size.
fn flush(path: &Path) -> Result<u64, LakeError> {
    let file = std::fs::File::open(path).map_err(io_error(path))?;
    file.sync_all().map_err(io_error(path))?;
    Ok(file.metadata().map_err(io_error(path))?.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer killed between staging a file and placing it leaves its
    /// staged copy; the next writer of that name, placing it or finding it
    /// placed, removes every such copy, and no other file.
    #[test]
    fn a_killed_writers_staged_copies_go_once_the_file_is_placed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("_lake.json");
        let leftovers = ["._lake.json.4562.s-1.tmp", "._lake.json.77.s-2.tmp"].map(|n| dir.path().join(n));
        let other = dir.path().join(".claim-000001.json.4562.s-3.tmp");
        for file in leftovers.iter().chain([&other]) {
            std::fs::write(file, b"half").unwrap();
        }
        create_exclusive(&path, b"{}").unwrap();
        assert!(leftovers.iter().all(|f| !f.exists()));
        assert!(other.exists(), "a staged copy of another name is not this writer's to remove");
        std::fs::write(&leftovers[0], b"half").unwrap();
        assert!(matches!(create_exclusive(&path, b"{}"), Err(LakeError::Exists(_))));
        assert!(!leftovers[0].exists());
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
    }

    #[test]
    fn locations_are_folders_or_object_store_urls_and_nothing_else() {
        assert_eq!(Location::parse("lake").unwrap(), Location::Folder("lake".into()));
        assert_eq!(Location::parse("file:///srv/lake").unwrap(), Location::Folder("/srv/lake".into()));
        for url in ["s3://bucket/prefix", "s3a://bucket", "gs://bucket/a/b", "az://container/lake"] {
            assert!(matches!(Location::parse(url), Ok(Location::Objects(_))), "{url}");
        }
        assert!(Location::parse("").unwrap_err().contains("empty"));
        assert!(Location::parse("s3:///prefix").unwrap_err().contains("names no bucket"));
        assert!(Location::parse("ftp://host/lake").unwrap_err().contains("is not a lake location"));
        assert!(Location::parse("file://host/lake").unwrap_err().contains("not a local path"));
        assert!(Location::parse("s3://bucket/a//b").unwrap_err().contains("prefix is not a key"));
    }

    /// A lake's keys are the folder layout's paths under the URL's prefix,
    /// unescaped, so other engines read the partitions from the keys.
    #[test]
    fn keys_sit_under_the_prefix_as_the_folders_paths() {
        let location = Location::parse("s3://bucket/teams/lake").unwrap();
        let Storage::Objects(objects) = Storage::at(&location).unwrap() else {
            panic!("not an object store")
        };
        let key = "attempts/day=2026-12-01/bucket=07/node-1-1-40.parquet";
        assert_eq!(objects.path(key).as_ref(), format!("teams/lake/{key}"));
        assert_eq!(objects.path("").as_ref(), "teams/lake");
        let storage = Storage::Objects(objects);
        assert_eq!(storage.describe("_lake.json"), "s3://bucket/teams/lake/_lake.json");
    }

    /// Two racing exclusive creates in a folder: exactly one wins, and the
    /// probe leaves nothing behind.
    #[test]
    fn a_folder_proves_its_exclusive_creates() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::at(&Location::Folder(dir.path().join("lake"))).unwrap();
        storage.prove().unwrap();
        assert!(!dir.path().join("lake/_probe").exists());
        // A proof killed mid-way left a staged copy: the next proof takes it
        // away with its own.
        let probes = dir.path().join("lake/_probe");
        std::fs::create_dir_all(&probes).unwrap();
        std::fs::write(probes.join(".probe-0a1b.json.4562.s-9c8d.tmp"), b"a").unwrap();
        storage.prove().unwrap();
        assert!(!probes.exists(), "{:?}", std::fs::read_dir(&probes).map(|d| d.count()));
    }
}
