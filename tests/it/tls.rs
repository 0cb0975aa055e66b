//! `serve --tls-cert --tls-key`: the OpenTelemetry Python SDK's exporters
//! (gRPC and HTTP) and an HTTPS client reach the service over TLS with a
//! certificate from a private CA; plain text is refused.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::service::{Service, cli_ingest, cli_report};

/// A throw-away CA and a certificate it signed for localhost and
/// 127.0.0.1, made by the openssl command line: (ca.pem, cert.pem, key.pem).
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let path = |name: &str| dir.join(name);
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl is installed");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    openssl(
        &[
            &["req", "-x509"],
            &ec[..],
            &["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=attempt-ledger test CA"],
        ]
        .concat(),
    );
    openssl(
        &[&["req"], &ec[..], &["-keyout", "key.pem", "-out", "leaf.csr", "-subj", "/CN=localhost"]].concat(),
    );
    std::fs::write(
        path("leaf.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "cert.pem",
        "-days",
        "2",
        "-extfile",
        "leaf.ext",
    ]);
    (path("ca.pem"), path("cert.pem"), path("key.pem"))
}

fn https_agent(ca: &Path) -> ureq::Agent {
    use ureq::tls::{Certificate, RootCerts, TlsConfig};
    let pem = std::fs::read(ca).unwrap();
    let root = Certificate::from_pem(&pem).unwrap().to_owned();
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .tls_config(TlsConfig::builder().root_certs(RootCerts::new_with_certs(&[root])).build())
        .build()
        .into()
}

#[test]
fn otlp_exporters_and_https_clients_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates(dir.path());
    let service = Service::start(
        &dir.path().join("tls.duckdb"),
        &["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()],
    );
    let https = service.http.replacen("http://", "https://", 1);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/otel_client.py");
    for (protocol, endpoint) in
        [("grpc", service.grpc.replacen("http://", "https://", 1)), ("http", https.clone())]
    {
        let expected = dir.path().join(format!("expected-{protocol}.jsonl"));
        let out = crate::python()
            .args([script, protocol, &endpoint, expected.to_str().unwrap()])
            .env("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca)
            // requests lets these override the exporter's own CA file (a
            // session's `verify` loses to the environment).
            .env_remove("REQUESTS_CA_BUNDLE")
            .env_remove("CURL_CA_BUNDLE")
            .output()
            .unwrap();
        assert!(out.status.success(), "{protocol}: {}", String::from_utf8_lossy(&out.stderr));
        cli_ingest(&dir.path().join("jsonl.duckdb"), &expected);
    }

    let agent = https_agent(&ca);
    let mut response = agent.get(&format!("{https}/api/v1/report")).call().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let mut over_tls: Value = serde_json::from_slice(&response.body_mut().read_to_vec().unwrap()).unwrap();
    // Both exports were acknowledged before the report was asked, so the
    // report waited for their derivation.
    let derivation = over_tls.as_object_mut().unwrap().remove("derivation").unwrap();
    assert_eq!(derivation["complete"], true, "{derivation}");
    // Both exports arrived whole: the same report as their records ingested
    // from files.
    assert_eq!(over_tls, cli_report(&dir.path().join("jsonl.duckdb")));
    assert_eq!(over_tls["attempts"]["total"], 10, "{over_tls}");

    // Plain HTTP to the TLS port gets no answer; nor does a client that
    // does not trust the CA.
    let plain: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    assert!(plain.get(&format!("{}/healthz", service.http)).call().is_err());
    assert!(plain.get(&format!("{https}/healthz")).call().is_err());
    assert_eq!(agent.get(&format!("{https}/healthz")).call().unwrap().status().as_u16(), 200);
    service.stop();
}

#[test]
fn a_bad_certificate_or_key_stops_serve_at_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (_, cert, key) = certificates(dir.path());
    let serve = |cert: &Path, key: &Path| {
        Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
            .args([
                "serve",
                "--db",
                dir.path().join("bad.duckdb").to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
            ])
            .args(["--otlp-grpc", "127.0.0.1:0", "--tls-cert", cert.to_str().unwrap(), "--tls-key"])
            .arg(key)
            .output()
            .unwrap()
    };
    // The key where the certificate belongs, and a key of another pair.
    let out = serve(&key, &key);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--tls-cert"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = serve(&cert, &dir.path().join("ca.key"));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("do not form a usable identity"), "{stderr}");
}
