//! TLS for the HTTP and gRPC listeners, from a PEM certificate chain and
//! private key (`serve --tls-cert --tls-key`). rustls with its `ring`
//! provider; TLS 1.2 and 1.3; HTTP/1.1 on the HTTP port and h2 on gRPC's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

/// The longest a TLS handshake on the gRPC port may take.
pub const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("--tls-cert {path}: {detail}")]
    Certificate { path: PathBuf, detail: String },
    #[error("--tls-key {path}: {detail}")]
    Key { path: PathBuf, detail: String },
    #[error("--tls-cert and --tls-key do not form a usable identity: {0}")]
    Identity(String),
}

/// The certificate chain and key as read, for both listeners.
#[derive(Clone)]
pub struct TlsFiles {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    acceptor: TlsAcceptor,
}

impl std::fmt::Debug for TlsFiles {
    // Never print the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsFiles").finish_non_exhaustive()
    }
}

impl TlsFiles {
    /// Reads and checks both files now, so a bad one stops `serve` at
    /// start with the file named, not at the first handshake.
    pub fn load(cert: &Path, key: &Path) -> Result<TlsFiles, TlsError> {
        let cert_error = |detail: String| TlsError::Certificate { path: cert.to_path_buf(), detail };
        let key_error = |detail: String| TlsError::Key { path: key.to_path_buf(), detail };
        let cert_pem = std::fs::read(cert).map_err(|e| cert_error(e.to_string()))?;
        let key_pem = std::fs::read(key).map_err(|e| key_error(e.to_string()))?;
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| cert_error(format!("not PEM certificates: {e}")))?;
        if chain.is_empty() {
            return Err(cert_error("no `BEGIN CERTIFICATE` block in the file".to_string()));
        }
        let private_key = PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| key_error(format!("no PEM private key (PKCS#8, PKCS#1 or SEC1): {e}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Identity(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, private_key)
            .map_err(|e| TlsError::Identity(e.to_string()))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsFiles { cert_pem, key_pem, acceptor: TlsAcceptor::from(Arc::new(config)) })
    }

    /// The acceptor of the HTTP listener.
    pub fn http_acceptor(&self) -> TlsAcceptor {
        self.acceptor.clone()
    }

    /// The gRPC listener's configuration (tonic builds its own, with h2).
    /// With the handshake under a deadline, so a client that starts one and
    /// stalls gives its connection back.
    pub fn grpc_config(&self) -> tonic::transport::ServerTlsConfig {
        tonic::transport::ServerTlsConfig::new()
            .identity(tonic::transport::Identity::from_pem(&self.cert_pem, &self.key_pem))
            .timeout(TLS_HANDSHAKE_TIMEOUT)
    }
}
