//! Versioned schema migrations: `migrations/NNNN_name.sql`, applied in order,
//! each in its own transaction, recorded in `schema_migrations`. Opening an
//! older database upgrades it; opening a newer one is refused rather than
//! guessed at.

use duckdb::Connection;

use super::error::StoreError;

#[derive(Debug, Clone)]
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

/// Every migration this binary knows, oldest first. Append; never edit one
/// that has shipped.
pub const MIGRATIONS: &[Migration] = &[
    Migration { version: 1, name: "attempts", sql: include_str!("../../migrations/0001_attempts.sql") },
    Migration {
        version: 2,
        name: "alert_events",
        sql: include_str!("../../migrations/0002_alert_events.sql"),
    },
    Migration { version: 3, name: "gateways", sql: include_str!("../../migrations/0003_gateways.sql") },
    Migration { version: 4, name: "facts", sql: include_str!("../../migrations/0004_facts.sql") },
    Migration {
        version: 5,
        name: "flat_facts_dimensions",
        sql: include_str!("../../migrations/0005_flat_facts_dimensions.sql"),
    },
    Migration {
        version: 6,
        name: "writer_probe",
        sql: include_str!("../../migrations/0006_writer_probe.sql"),
    },
    Migration { version: 7, name: "findings", sql: include_str!("../../migrations/0007_findings.sql") },
    Migration {
        version: 8,
        name: "finding_budgets",
        sql: include_str!("../../migrations/0008_finding_budgets.sql"),
    },
    Migration {
        version: 9,
        name: "finding_rollups",
        sql: include_str!("../../migrations/0009_finding_rollups.sql"),
    },
    Migration {
        version: 10,
        name: "derivation_queue",
        sql: include_str!("../../migrations/0010_derivation_queue.sql"),
    },
    Migration {
        version: 11,
        name: "recovery_histogram",
        sql: include_str!("../../migrations/0011_recovery_histogram.sql"),
    },
    Migration { version: 12, name: "call_facts", sql: include_str!("../../migrations/0012_call_facts.sql") },
    Migration {
        version: 13,
        name: "span_id_lengths",
        sql: include_str!("../../migrations/0013_span_id_lengths.sql"),
    },
    Migration { version: 14, name: "lake", sql: include_str!("../../migrations/0014_lake.sql") },
    Migration { version: 15, name: "steps", sql: include_str!("../../migrations/0015_steps.sql") },
    Migration {
        version: 16,
        name: "step_rollups",
        sql: include_str!("../../migrations/0016_step_rollups.sql"),
    },
    Migration { version: 17, name: "shapes", sql: include_str!("../../migrations/0017_shapes.sql") },
    Migration {
        version: 18,
        name: "lake_identity",
        sql: include_str!("../../migrations/0018_lake_identity.sql"),
    },
    Migration { version: 19, name: "int64_sums", sql: include_str!("../../migrations/0019_int64_sums.sql") },
    Migration { version: 20, name: "bill", sql: include_str!("../../migrations/0020_bill.sql") },
    Migration { version: 21, name: "ratelimit", sql: include_str!("../../migrations/0021_ratelimit.sql") },
    Migration { version: 22, name: "headroom", sql: include_str!("../../migrations/0022_headroom.sql") },
    Migration { version: 23, name: "circuits", sql: include_str!("../../migrations/0023_circuits.sql") },
    Migration {
        version: 24,
        name: "conventions_2026",
        sql: include_str!("../../migrations/0024_conventions_2026.sql"),
    },
    Migration { version: 25, name: "prices", sql: include_str!("../../migrations/0025_prices.sql") },
    Migration {
        version: 26,
        name: "attempt_findings_from_steps",
        sql: include_str!("../../migrations/0026_attempt_findings_from_steps.sql"),
    },
];

/// The migration after which stored provider names are canonical: the store
/// re-applies the alias table once it has run.
pub const CANONICAL_PROVIDERS_VERSION: i64 = 3;

/// Brings the schema to the newest version in `migrations`; returns the
/// versions applied.
pub fn migrate(conn: &Connection, migrations: &[Migration]) -> Result<Vec<i64>, StoreError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             version    BIGINT    NOT NULL,
             name       VARCHAR   NOT NULL,
             applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp
         );",
    )?;
    let current = schema_version(conn)?;
    let newest = migrations.last().map_or(0, |m| m.version);
    if current > newest {
        return Err(StoreError::SchemaTooNew { found: current, supported: newest });
    }
    let mut applied = Vec::new();
    for migration in migrations.iter().filter(|m| m.version > current) {
        conn.execute_batch("BEGIN TRANSACTION")?;
        let result = conn.execute_batch(migration.sql).and_then(|_| {
            conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (?, ?)",
                duckdb::params![migration.version, migration.name],
            )
        });
        match result {
            Ok(_) => conn.execute_batch("COMMIT")?,
            Err(source) => {
                conn.execute_batch("ROLLBACK")?;
                return Err(StoreError::Migration { version: migration.version, source });
            }
        }
        applied.push(migration.version);
    }
    Ok(applied)
}

pub fn schema_version(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.query_row("SELECT coalesce(max(version), 0) FROM schema_migrations", [], |row| row.get(0))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The newest version this binary knows.
    fn newest() -> i64 {
        MIGRATIONS.last().unwrap().version
    }

    /// A migration from a newer binary.
    fn next() -> Migration {
        Migration {
            version: newest() + 1,
            name: "test_column",
            sql: "ALTER TABLE attempts ADD COLUMN test_column VARCHAR;",
        }
    }

    #[test]
    fn an_older_database_is_upgraded_once() {
        let conn = Connection::open_in_memory().unwrap();
        assert_eq!(migrate(&conn, &MIGRATIONS[..1]).unwrap(), vec![1]);
        assert_eq!(migrate(&conn, MIGRATIONS).unwrap(), (2..=newest()).collect::<Vec<_>>());
        let newer = [MIGRATIONS, &[next()]].concat();
        assert_eq!(migrate(&conn, &newer).unwrap(), vec![newest() + 1]);
        assert_eq!(migrate(&conn, &newer).unwrap(), Vec::<i64>::new());
        assert_eq!(schema_version(&conn).unwrap(), newest() + 1);
        conn.execute_batch("SELECT test_column FROM attempts").unwrap();
    }

    #[test]
    fn a_newer_database_is_refused() {
        let conn = Connection::open_in_memory().unwrap();
        migrate(&conn, &[MIGRATIONS, &[next()]].concat()).unwrap();
        let err = migrate(&conn, MIGRATIONS).unwrap_err();
        let (found, supported) = (newest() + 1, newest());
        assert!(
            matches!(err, StoreError::SchemaTooNew { found: f, supported: s } if f == found && s == supported),
            "{err}"
        );
    }

    #[test]
    fn a_failing_migration_leaves_the_schema_as_it_was() {
        let conn = Connection::open_in_memory().unwrap();
        let broken =
            Migration { version: newest() + 1, name: "broken", sql: "CREATE TABLE t (x INT); SELECT nope;" };
        let err = migrate(&conn, &[MIGRATIONS, &[broken]].concat()).unwrap_err();
        assert!(matches!(err, StoreError::Migration { version, .. } if version == newest() + 1));
        assert_eq!(schema_version(&conn).unwrap(), newest());
        assert!(conn.execute_batch("SELECT * FROM t").is_err());
    }
}
