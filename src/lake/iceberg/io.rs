//! Iceberg's file I/O over the lake's own object store client: the table's
//! metadata (its JSON, manifest lists and manifests) is read and written
//! through the same `object_store` client, credentials and endpoint as the
//! lake's files, with no second storage stack (iceberg-rust's own is
//! OpenDAL's).

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use iceberg::io::{
    FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage, StorageConfig, StorageFactory,
};
use iceberg::{Error, ErrorKind, Result};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

/// The store of one bucket, and the `scheme://bucket` its absolute paths
/// start with.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ObjectStorage {
    base: String,
    // Built from the lake's location, never from serialised state: a
    // deserialised copy has no store and says so when used.
    #[serde(skip)]
    store: Option<Arc<dyn ObjectStore>>,
}

impl ObjectStorage {
    pub fn new(store: Arc<dyn ObjectStore>, base: String) -> Self {
        Self { base: base.trim_end_matches('/').to_string(), store: Some(store) }
    }

    fn store(&self) -> Result<&Arc<dyn ObjectStore>> {
        self.store
            .as_ref()
            .ok_or_else(|| Error::new(ErrorKind::Unexpected, "object storage used without its store"))
    }

    /// The key of an absolute path of this bucket.
    fn key(&self, path: &str) -> Result<ObjectPath> {
        let rest =
            path.strip_prefix(&self.base).and_then(|rest| rest.strip_prefix('/')).ok_or_else(|| {
                Error::new(
                    ErrorKind::DataInvalid,
                    format!("{path} is not in the lake's bucket {}", self.base),
                )
            })?;
        ObjectPath::parse(rest).map_err(|e| Error::new(ErrorKind::DataInvalid, format!("{path}: {e}")))
    }
}

fn store_error(path: &str) -> impl FnOnce(object_store::Error) -> Error + '_ {
    move |e| match e {
        object_store::Error::NotFound { .. } => {
            Error::new(ErrorKind::DataInvalid, format!("{path} does not exist"))
        }
        other => Error::new(ErrorKind::Unexpected, format!("{path}: {other}")),
    }
}

#[async_trait]
#[typetag::serde]
impl Storage for ObjectStorage {
    async fn exists(&self, path: &str) -> Result<bool> {
        match self.store()?.head(&self.key(path)?).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(store_error(path)(e)),
        }
    }

    async fn metadata(&self, path: &str) -> Result<FileMetadata> {
        let meta = self.store()?.head(&self.key(path)?).await.map_err(store_error(path))?;
        Ok(FileMetadata { size: meta.size })
    }

    async fn read(&self, path: &str) -> Result<Bytes> {
        let got = self.store()?.get(&self.key(path)?).await.map_err(store_error(path))?;
        got.bytes().await.map_err(store_error(path))
    }

    async fn reader(&self, path: &str) -> Result<Box<dyn FileRead>> {
        Ok(Box::new(ObjectRead {
            store: self.store()?.clone(),
            key: self.key(path)?,
            path: path.to_string(),
        }))
    }

    async fn write(&self, path: &str, bs: Bytes) -> Result<()> {
        self.store()?.put(&self.key(path)?, PutPayload::from_bytes(bs)).await.map_err(store_error(path))?;
        Ok(())
    }

    async fn writer(&self, path: &str) -> Result<Box<dyn FileWrite>> {
        Ok(Box::new(ObjectWrite {
            store: self.store()?.clone(),
            key: self.key(path)?,
            path: path.to_string(),
            buffer: Vec::new(),
        }))
    }

    async fn delete(&self, path: &str) -> Result<()> {
        match self.store()?.delete(&self.key(path)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(store_error(path)(e)),
        }
    }

    async fn delete_prefix(&self, path: &str) -> Result<()> {
        let store = self.store()?;
        let prefix = self.key(path.trim_end_matches('/'))?;
        let mut listed = store.list(Some(&prefix));
        while let Some(meta) = listed.next().await {
            let meta = meta.map_err(store_error(path))?;
            match store.delete(&meta.location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(store_error(path)(e)),
            }
        }
        Ok(())
    }

    async fn delete_stream(&self, mut paths: BoxStream<'static, String>) -> Result<()> {
        while let Some(path) = paths.next().await {
            self.delete(&path).await?;
        }
        Ok(())
    }

    fn new_input(&self, path: &str) -> Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

struct ObjectRead {
    store: Arc<dyn ObjectStore>,
    key: ObjectPath,
    path: String,
}

#[async_trait]
impl FileRead for ObjectRead {
    async fn read(&self, range: Range<u64>) -> Result<Bytes> {
        self.store.get_range(&self.key, range).await.map_err(store_error(&self.path))
    }
}

/// A metadata file, written whole at close: Iceberg's metadata files are
/// small (a manifest is a few hundred KiB at most).
struct ObjectWrite {
    store: Arc<dyn ObjectStore>,
    key: ObjectPath,
    path: String,
    buffer: Vec<u8>,
}

#[async_trait]
impl FileWrite for ObjectWrite {
    async fn write(&mut self, bs: Bytes) -> Result<()> {
        self.buffer.extend_from_slice(&bs);
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        let payload = PutPayload::from(std::mem::take(&mut self.buffer));
        self.store.put(&self.key, payload).await.map_err(store_error(&self.path))?;
        Ok(())
    }
}

/// Builds the one `ObjectStorage` it holds, whatever the configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ObjectStorageFactory(pub ObjectStorage);

#[typetag::serde]
impl StorageFactory for ObjectStorageFactory {
    fn build(&self, _config: &StorageConfig) -> Result<Arc<dyn Storage>> {
        self.0.store()?;
        Ok(Arc::new(self.0.clone()))
    }
}
