//! Which attempt ids and workflow ids the store may already hold: Bloom
//! filters in front of the lookups. An id the filter has never seen is new
//! for sure, so the writer's duplicate check only queries DuckDB for ids it
//! may hold (redeliveries), and a derivation round only looks up old facts
//! for workflows that may have some (a workflow's later attempts): the cost
//! of a write follows its batch, not the history.
//!
//! Each is a chain of filters (a scalable Bloom filter): built from the
//! database once (one scan of the ids), sized for twice what is stored (at
//! least 1M ids) at a false-positive rate of 1e-6, about 3.6 bytes per id.
//! When the newest filter of the chain is full, a new one twice its size is
//! added (at half its false-positive rate, so the chain's rate stays below
//! 2e-6): nothing is ever scanned again, and memory stays linear in the ids
//! (at most about 2 x 3.6 bytes per stored id, plus what `reserve` asked
//! for). A false positive costs one extra lookup, never a wrong answer.

use duckdb::Connection;
use duckdb::arrow::array::{Array, AsArray};
use duckdb::arrow::compute::cast;
use duckdb::arrow::datatypes::DataType;
use fastbloom::BloomFilter;

use super::error::StoreError;

const FALSE_POSITIVE_RATE: f64 = 1e-6;
const MIN_CAPACITY: usize = 1 << 20;

/// One filter of a chain and how many ids it was sized for and holds.
struct Filter {
    bloom: BloomFilter,
    capacity: usize,
    held: usize,
}

impl Filter {
    fn new(capacity: usize, rate: f64) -> Self {
        Self { bloom: BloomFilter::with_false_pos(rate).expected_items(capacity), capacity, held: 0 }
    }
}

/// A scalable Bloom filter of ids.
pub(super) struct IdFilter {
    chain: Vec<Filter>,
    rate: f64,
}

impl IdFilter {
    fn with_capacity(capacity: usize) -> Self {
        Self {
            chain: vec![Filter::new(capacity.max(MIN_CAPACITY), FALSE_POSITIVE_RATE)],
            rate: FALSE_POSITIVE_RATE,
        }
    }

    /// The ids `ids_sql` returns (`count_sql` counts them first, to size
    /// the filter).
    pub fn load(conn: &Connection, count_sql: &str, ids_sql: &str) -> Result<Self, StoreError> {
        let began = std::time::Instant::now();
        let stored: i64 = conn.query_row(count_sql, [], |r| r.get(0))?;
        let mut filter = Self::with_capacity(2 * stored.max(0) as usize);
        let mut stmt = conn.prepare(ids_sql)?;
        for batch in stmt.query_arrow([])? {
            let column = cast(batch.column(0), &DataType::Utf8)?;
            let ids = column.as_string::<i32>();
            for i in 0..ids.len() {
                if ids.is_valid(i) {
                    filter.insert(ids.value(i));
                }
            }
        }
        tracing::debug!(
            ids = filter.held(),
            elapsed_ms = began.elapsed().as_millis() as u64,
            "id filter loaded"
        );
        Ok(filter)
    }

    pub fn may_hold(&self, id: &str) -> bool {
        self.chain.iter().any(|f| f.bloom.contains(id))
    }

    pub fn insert(&mut self, id: &str) {
        self.reserve(1);
        if let Some(last) = self.chain.last_mut() {
            last.bloom.insert(id);
            last.held += 1;
        }
    }

    /// Makes room for `more` ids in the newest filter (a bulk import says
    /// how many records its input holds, so the chain grows once, to fit).
    pub fn reserve(&mut self, more: usize) {
        let Some(last) = self.chain.last() else { return };
        if last.held + more <= last.capacity {
            return;
        }
        let capacity = (last.capacity * 2).max(more);
        self.rate /= 2.0;
        self.chain.push(Filter::new(capacity, self.rate));
    }

    fn held(&self) -> usize {
        self.chain.iter().map(|f| f.held).sum()
    }
}

/// The filter of stored attempt ids (the writer's duplicate check).
pub(super) fn load_attempt_ids(conn: &Connection) -> Result<IdFilter, StoreError> {
    IdFilter::load(conn, "SELECT count(*) FROM attempts", "SELECT attempt_id FROM attempts")
}

/// The filter of workflow ids with derived facts (a derivation round's
/// lookup of old facts).
pub(super) fn load_workflow_ids(conn: &Connection) -> Result<IdFilter, StoreError> {
    IdFilter::load(conn, "SELECT count(*) FROM workflow_facts", "SELECT workflow_id FROM workflow_facts")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_filter_grows_a_new_link_and_forgets_nothing() {
        let mut filter = IdFilter::with_capacity(0);
        let ids: Vec<String> = (0..(MIN_CAPACITY + 10)).map(|i| format!("id-{i}")).collect();
        for id in &ids {
            filter.insert(id);
        }
        assert_eq!(filter.chain.len(), 2);
        assert!(ids.iter().all(|id| filter.may_hold(id)));
        filter.reserve(5 * MIN_CAPACITY);
        assert_eq!(filter.chain.len(), 3);
        assert!(filter.chain[2].capacity >= 5 * MIN_CAPACITY);
        assert!(!filter.may_hold("never-inserted"));
    }
}
