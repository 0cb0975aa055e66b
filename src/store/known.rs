//! Which attempt ids and workflow ids the store may already hold: two Bloom
//! filters in front of the writer's lookups. An id the filter has never
//! seen is new for sure, so the duplicate check and the facts lookup only
//! query DuckDB for ids it may hold (redeliveries, a workflow's later
//! attempts), and the cost of a write follows its batch, not the history.
//!
//! Bounds: built from the database on a writer's first write (one scan of
//! the ids), sized for twice what is stored (at least 1M ids each) at a
//! false-positive rate of 1e-6, about 3.6 bytes per id: 72 MB for 10M
//! attempts and 5M workflows. Past that capacity they are rebuilt at twice
//! the size. A false positive costs one extra lookup, never a wrong answer.

use duckdb::Connection;
use duckdb::arrow::array::{Array, AsArray};
use duckdb::arrow::compute::cast;
use duckdb::arrow::datatypes::DataType;
use fastbloom::BloomFilter;

use super::StoreError;

const FALSE_POSITIVE_RATE: f64 = 1e-6;
const MIN_CAPACITY: usize = 1 << 20;

/// One filter and how many ids it was sized for and holds.
struct Filter {
    bloom: BloomFilter,
    capacity: usize,
    held: usize,
}

impl Filter {
    fn load(conn: &Connection, count_sql: &str, ids_sql: &str) -> Result<Self, StoreError> {
        let stored: i64 = conn.query_row(count_sql, [], |r| r.get(0))?;
        let capacity = MIN_CAPACITY.max(2 * stored as usize);
        let mut bloom = BloomFilter::with_false_pos(FALSE_POSITIVE_RATE).expected_items(capacity);
        let mut held = 0;
        let mut stmt = conn.prepare(ids_sql)?;
        for batch in stmt.query_arrow([])? {
            let column = cast(batch.column(0), &DataType::Utf8)?;
            let ids = column.as_string::<i32>();
            for i in 0..ids.len() {
                if ids.is_valid(i) {
                    bloom.insert(ids.value(i));
                    held += 1;
                }
            }
        }
        Ok(Self { bloom, capacity, held })
    }
}

pub(super) struct KnownIds {
    attempts: Filter,
    workflows: Filter,
}

impl KnownIds {
    pub fn load(conn: &Connection) -> Result<Self, StoreError> {
        let began = std::time::Instant::now();
        let known = Self {
            attempts: Filter::load(conn, "SELECT count(*) FROM attempts", "SELECT attempt_id FROM attempts")?,
            workflows: Filter::load(
                conn,
                "SELECT count(*) FROM workflow_facts",
                "SELECT workflow_id FROM workflow_facts",
            )?,
        };
        tracing::debug!(
            attempts = known.attempts.held,
            workflows = known.workflows.held,
            elapsed_ms = began.elapsed().as_millis() as u64,
            "id filters loaded"
        );
        Ok(known)
    }

    pub fn may_hold_attempt(&self, id: &str) -> bool {
        self.attempts.bloom.contains(id)
    }

    pub fn may_hold_workflow(&self, id: &str) -> bool {
        self.workflows.bloom.contains(id)
    }

    pub fn insert<'a>(
        &mut self,
        attempt_ids: impl Iterator<Item = &'a str>,
        workflow_ids: impl Iterator<Item = &'a str>,
    ) {
        for id in attempt_ids {
            self.attempts.bloom.insert(id);
            self.attempts.held += 1;
        }
        for id in workflow_ids {
            self.workflows.bloom.insert(id);
            self.workflows.held += 1;
        }
    }

    /// Past its capacity a filter's false-positive rate climbs: load again.
    pub fn is_full(&self) -> bool {
        self.attempts.held > self.attempts.capacity || self.workflows.held > self.workflows.capacity
    }
}
