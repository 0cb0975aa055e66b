//! Commits iceberg-rust's own actions cannot make (its commit type is
//! built only inside the crate): the table's updates and requirements
//! sent to the catalog as the catalog's protocol says, so the table moves
//! by compare-and-swap as with any other commit.
//! - the JDBC catalog's tables: the new metadata file is written, then the
//!   table's row moves to it only if it still points at the metadata the
//!   updates were made against;
//! - a REST catalog: the updates and requirements are POSTed to the table
//!   (`CommitTableRequest`), and the catalog checks the requirements.

use std::str::FromStr;

use iceberg::table::Table;
use iceberg::{MetadataLocation, TableIdent, TableRequirement, TableUpdate};
use serde::Deserialize;

use super::{CatalogUri, SQL_CATALOG_NAME};

/// Why a commit did not land.
#[derive(Debug)]
pub enum CommitError {
    /// The table moved since it was read: read it again and redo.
    Conflict,
    Failed(String),
}

impl From<iceberg::Error> for CommitError {
    fn from(error: iceberg::Error) -> Self {
        CommitError::Failed(error.to_string())
    }
}

/// Commits `updates` to `table` (read as it is now) through `catalog`,
/// if the table still meets `requirements`.
pub async fn commit(
    catalog: &CatalogUri,
    ident: &TableIdent,
    table: &Table,
    updates: Vec<TableUpdate>,
    requirements: Vec<TableRequirement>,
) -> Result<(), CommitError> {
    match catalog {
        CatalogUri::Postgres(uri) | CatalogUri::Sqlite(uri) => {
            let dollar = matches!(catalog, CatalogUri::Postgres(_));
            commit_sql(uri, dollar, ident, table, updates, requirements).await
        }
        CatalogUri::Rest { url, properties } => {
            commit_rest(url, properties, ident, updates, requirements).await
        }
    }
}

async fn commit_sql(
    uri: &str,
    dollar: bool,
    ident: &TableIdent,
    table: &Table,
    updates: Vec<TableUpdate>,
    requirements: Vec<TableRequirement>,
) -> Result<(), CommitError> {
    let current = table.metadata_location_result()?.to_string();
    for requirement in &requirements {
        if requirement.check(Some(table.metadata())).is_err() {
            return Err(CommitError::Conflict);
        }
    }
    let mut builder = table.metadata().clone().into_builder(Some(current.clone()));
    for update in updates {
        builder = update.apply(builder)?;
    }
    let metadata = builder.build()?.metadata;
    let location = MetadataLocation::from_str(&current)?.with_next_version().with_new_metadata(&metadata);
    metadata.write_to(table.file_io(), &location).await?;

    sqlx::any::install_default_drivers();
    let failed = |e: sqlx::Error| CommitError::Failed(format!("the catalog's database: {e}"));
    let mut connection = <sqlx::AnyConnection as sqlx::Connection>::connect(uri).await.map_err(failed)?;
    let mark = |n: usize| if dollar { format!("${n}") } else { "?".to_string() };
    let statement = format!(
        "UPDATE iceberg_tables SET metadata_location = {}, previous_metadata_location = {}
         WHERE catalog_name = {} AND table_namespace = {} AND table_name = {}
           AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL) AND metadata_location = {}",
        mark(1),
        mark(2),
        mark(3),
        mark(4),
        mark(5),
        mark(6)
    );
    let moved = sqlx::query(&statement)
        .bind(location.to_string())
        .bind(current.clone())
        .bind(SQL_CATALOG_NAME)
        .bind(ident.namespace().join("."))
        .bind(ident.name())
        .bind(current)
        .execute(&mut connection)
        .await
        .map_err(failed)?;
    if moved.rows_affected() == 0 {
        // The metadata file written for it is never pointed at: `lake
        // check --catalog` names such files.
        return Err(CommitError::Conflict);
    }
    Ok(())
}

/// The REST catalog's `/v1/config` answer: what it sets over the client's
/// properties (the `prefix`, most of all).
#[derive(Debug, Default, Deserialize)]
struct CatalogConfig {
    #[serde(default)]
    defaults: std::collections::HashMap<String, String>,
    #[serde(default)]
    overrides: std::collections::HashMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct TokenAnswer {
    access_token: String,
}

async fn commit_rest(
    url: &str,
    properties: &[(String, String)],
    ident: &TableIdent,
    updates: Vec<TableUpdate>,
    requirements: Vec<TableRequirement>,
) -> Result<(), CommitError> {
    let property = |key: &str| properties.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .map_err(|e| CommitError::Failed(e.to_string()))?;
    let failed = |what: &str, e: reqwest::Error| CommitError::Failed(format!("{what}: {e}"));
    let token = match (property("token"), property("credential")) {
        (Some(token), _) => Some(token),
        (None, Some(credential)) => {
            let (id, secret) = credential.split_once(':').unwrap_or(("", credential.as_str()));
            let endpoint = property("oauth2-server-uri").unwrap_or_else(|| format!("{url}/v1/oauth/tokens"));
            let scope = property("scope").unwrap_or_else(|| "catalog".to_string());
            let form = serde_urlencoded::to_string([
                ("grant_type", "client_credentials"),
                ("client_id", id),
                ("client_secret", secret),
                ("scope", scope.as_str()),
            ])
            .map_err(|e| CommitError::Failed(e.to_string()))?;
            let answer = client
                .post(endpoint)
                .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(form)
                .send()
                .await
                .map_err(|e| failed("the catalog's token endpoint", e))?;
            let answer = answer.error_for_status().map_err(|e| failed("the catalog's token endpoint", e))?;
            let bytes = answer.bytes().await.map_err(|e| failed("the catalog's token endpoint", e))?;
            let token: TokenAnswer = serde_json::from_slice(&bytes)
                .map_err(|e| CommitError::Failed(format!("the catalog's token endpoint answered {e}")))?;
            Some(token.access_token)
        }
        (None, None) => None,
    };
    let authorized = |request: reqwest::RequestBuilder| match &token {
        Some(token) => request.bearer_auth(token),
        None => request,
    };

    let mut config_url = format!("{url}/v1/config");
    if let Some(warehouse) = property("warehouse") {
        config_url.push_str(&format!("?warehouse={}", urlencode(&warehouse)));
    }
    let answer =
        authorized(client.get(config_url)).send().await.map_err(|e| failed("the catalog's config", e))?;
    let config: CatalogConfig = if answer.status().is_success() {
        let bytes = answer.bytes().await.map_err(|e| failed("the catalog's config", e))?;
        serde_json::from_slice(&bytes).unwrap_or_default()
    } else {
        CatalogConfig::default()
    };
    // The catalog's defaults, then the client's properties, then the
    // catalog's overrides: the REST protocol's order.
    let prefix = config
        .overrides
        .get("prefix")
        .cloned()
        .or_else(|| property("prefix"))
        .or(config.defaults.get("prefix").cloned());
    let base = config.overrides.get("uri").cloned().unwrap_or_else(|| url.to_string());
    let mut endpoint = format!("{}/v1", base.trim_end_matches('/'));
    if let Some(prefix) = prefix.filter(|p| !p.is_empty()) {
        endpoint.push('/');
        endpoint.push_str(&prefix);
    }
    endpoint.push_str(&format!(
        "/namespaces/{}/tables/{}",
        ident.namespace().to_url_string(),
        urlencode(ident.name())
    ));
    let body = serde_json::json!({
        "identifier": ident,
        "requirements": requirements,
        "updates": updates,
    });
    let answer = authorized(client.post(endpoint))
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| failed("the catalog", e))?;
    match answer.status().as_u16() {
        200..=299 => Ok(()),
        409 => Err(CommitError::Conflict),
        status => {
            let text = answer.text().await.unwrap_or_default();
            Err(CommitError::Failed(format!(
                "the catalog answered {status}: {}",
                text.chars().take(500).collect::<String>()
            )))
        }
    }
}

fn urlencode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>().replace('+', "%20")
}
