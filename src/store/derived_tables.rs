//! The derived tables, listed once. A new derived table is named here (and
//! in the migration that creates it): the statements of a derivation round
//! that store its new rows, keep its old ones, difference them for the
//! rollups, merge the sums, drop the scratch, check and digest it are
//! generated from these lists, and a test checks that they name every
//! derived table of the schema.

use super::columns::SPEND_MEASURES;

/// A derived table with rows per workflow, each carrying its workflow's
/// `first_at` and `workflow_id`: a write replaces a workflow's rows.
pub(super) struct PerWorkflow {
    pub table: &'static str,
    /// `facts.sql` builds the new rows as `temp.new_<rows>`; a write keeps
    /// the rows they replace as `temp.old_<rows>`.
    pub rows: &'static str,
    /// The order rows are appended in: by first attempt, so zone maps on
    /// first_at prune lookups and windows; steps then by workflow and
    /// position, so each workflow's steps lie together and a replay reads
    /// them in order without sorting (`store::tune` checks that they do,
    /// and sorts when an older file's do not).
    pub order: &'static str,
    /// The view the rollup scripts read its signed rows from (`+1` a row
    /// added, `-1` a row taken away), when they read it.
    pub rollup_source: Option<&'static str>,
    /// Its family in the per-attempt cost figures (`cost.rs`).
    pub family: &'static str,
}

pub(super) const PER_WORKFLOW: [PerWorkflow; 7] = [
    PerWorkflow {
        table: "workflow_facts",
        rows: "facts",
        order: "first_at",
        rollup_source: Some("rollup_source"),
        family: "facts",
    },
    PerWorkflow {
        table: "workflow_spend",
        rows: "spend",
        order: "first_at",
        rollup_source: Some("rollup_spend_source"),
        family: "spend",
    },
    PerWorkflow {
        table: "workflow_latency",
        rows: "latency",
        order: "first_at",
        rollup_source: Some("rollup_latency_source"),
        family: "latency",
    },
    PerWorkflow {
        table: "workflow_findings",
        rows: "findings",
        order: "first_at",
        rollup_source: Some("rollup_findings_source"),
        family: "findings",
    },
    PerWorkflow {
        table: "workflow_steps",
        rows: "steps",
        order: "first_at, workflow_id, seq",
        rollup_source: Some("rollup_steps_source"),
        family: "steps",
    },
    PerWorkflow {
        table: "workflow_times",
        rows: "times",
        order: "first_at",
        rollup_source: None,
        family: "workflow times",
    },
    PerWorkflow {
        table: "workflow_headroom",
        rows: "headroom",
        order: "first_at",
        rollup_source: None,
        family: "headroom",
    },
];

/// Sums by minute of what the rollup scripts (`rollups.sql`,
/// `finding_rollups.sql`, `step_rollups.sql`) derive: its minute table, its
/// all-time totals (none for the findings: an audit reads their minutes,
/// to find its most recent examples), the scripts' output that feeds both,
/// and its measures (every other column is a key).
pub(super) struct Rollup {
    pub minutes: &'static str,
    pub totals: Option<&'static str>,
    pub delta: &'static str,
    pub measures: &'static [&'static [&'static str]],
    pub family: &'static str,
}

pub(super) const ROLLUPS: [Rollup; 7] = [
    Rollup {
        minutes: "rollup_workflows",
        totals: Some("total_workflows"),
        delta: "temp.r_workflows",
        measures: &[&["workflows"]],
        family: "rollups",
    },
    Rollup {
        minutes: "rollup_attempts",
        totals: Some("total_attempts"),
        delta: "temp.r_attempts",
        measures: &[SPEND_MEASURES],
        family: "rollups",
    },
    Rollup {
        minutes: "rollup_latency",
        totals: Some("total_latency"),
        delta: "temp.r_latency",
        measures: &[&["observations", "sum_us"]],
        family: "rollups",
    },
    Rollup {
        minutes: "rollup_findings",
        totals: None,
        delta: "temp.r_findings",
        measures: &[SPEND_MEASURES],
        family: "finding rollups",
    },
    Rollup {
        minutes: "rollup_finding_sets",
        totals: None,
        delta: "temp.r_finding_sets",
        measures: &[&["workflows", "workflow_attempts"]],
        family: "finding rollups",
    },
    Rollup {
        minutes: "rollup_recovery",
        totals: Some("total_recovery"),
        delta: "temp.r_recovery",
        measures: &[&["workflows", "sum_us"]],
        family: "rollups",
    },
    Rollup {
        minutes: "rollup_steps",
        totals: Some("total_steps"),
        delta: "temp.r_steps",
        measures: &[&["reached", "delivered"], SPEND_MEASURES, &["added_us", "added_to_outcome_us"]],
        family: "step rollups",
    },
];

/// The step shapes replays read and their sums (`shapes.rs` keeps them
/// from `temp.r_shapes`).
pub(super) const SHAPE_TABLES: [&str; 2] = ["shape_steps", "total_shapes"];
const SHAPES_DELTA: &str = "temp.r_shapes";

/// Every derived table, per-workflow tables first, in a fixed order.
pub(super) fn all() -> impl Iterator<Item = &'static str> {
    PER_WORKFLOW
        .iter()
        .map(|t| t.table)
        .chain(ROLLUPS.iter().map(|r| r.minutes))
        .chain(ROLLUPS.iter().filter_map(|r| r.totals))
        .chain(SHAPE_TABLES)
}

/// Drops the new rows `facts.sql` built, once stored.
pub(super) fn drop_new() -> String {
    PER_WORKFLOW.iter().map(|t| format!("DROP TABLE temp.new_{};", t.rows)).collect()
}

/// Drops the old rows a write kept for the difference.
pub(super) fn drop_old() -> String {
    PER_WORKFLOW.iter().map(|t| format!("DROP TABLE temp.old_{};", t.rows)).collect()
}

/// What the rollup scripts read.
pub(super) enum RollupInput {
    /// New rows minus the old ones they replace (a write).
    Difference,
    /// Every stored row (a rebuild of the sums).
    Stored,
}

/// Defines the rollup scripts' source views.
pub(super) fn define_rollup_sources(input: RollupInput) -> String {
    PER_WORKFLOW
        .iter()
        .filter_map(|t| Some((t, t.rollup_source?)))
        .map(|(t, view)| match input {
            RollupInput::Difference => format!(
                "CREATE OR REPLACE TEMP VIEW {view} AS
                 SELECT -1::BIGINT AS sign, * FROM temp.old_{rows}
                 UNION ALL BY NAME
                 SELECT 1::BIGINT AS sign, * FROM temp.new_{rows};\n",
                rows = t.rows
            ),
            RollupInput::Stored => {
                format!(
                    "CREATE OR REPLACE TEMP VIEW {view} AS SELECT 1::BIGINT AS sign, * FROM {};\n",
                    t.table
                )
            }
        })
        .collect()
}

pub(super) fn drop_rollup_sources() -> String {
    PER_WORKFLOW
        .iter()
        .filter_map(|t| t.rollup_source)
        .map(|view| format!("DROP VIEW temp.{view};"))
        .collect()
}

/// The first and last minute the rollup scripts' output touches.
pub(super) fn touched_minutes_sql() -> String {
    let each: Vec<String> = ROLLUPS.iter().map(|r| format!("SELECT minute FROM {}", r.delta)).collect();
    format!("SELECT min(minute), max(minute) FROM ({})", each.join(" UNION ALL "))
}

/// The family of a derived table, or of what builds it (`temp.new_*`,
/// `temp.r_*`), in the per-attempt cost figures.
pub(super) fn family_of(name: &str) -> Option<&'static str> {
    let name = name.trim_start_matches("temp.");
    let per_workflow =
        PER_WORKFLOW.iter().find(|t| t.table == name || name.strip_prefix("new_") == Some(t.rows));
    let rollup = ROLLUPS
        .iter()
        .find(|r| r.minutes == name || r.totals == Some(name) || r.delta.trim_start_matches("temp.") == name);
    let shapes = (SHAPE_TABLES.contains(&name) || SHAPES_DELTA.trim_start_matches("temp.") == name)
        .then_some("shapes");
    per_workflow.map(|t| t.family).or(rollup.map(|r| r.family)).or(shapes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    /// A derived table the schema has and the lists do not would be left
    /// out of the round's swaps, checks and digests: the lists must name
    /// every one.
    #[test]
    fn the_lists_name_every_derived_table_of_the_schema() {
        let store = Store::open_in_memory().unwrap();
        let schema: Vec<String> = store
            .conn
            .prepare(
                "SELECT table_name FROM duckdb_tables() WHERE NOT temporary
                   AND regexp_matches(table_name, '^(workflow|rollup|total|shape)_')
                 ORDER BY 1",
            )
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let mut listed: Vec<String> = all().map(String::from).collect();
        listed.sort();
        assert_eq!(listed, schema);
        for t in &PER_WORKFLOW {
            let columns: i64 = store
                .conn
                .query_row(
                    "SELECT count(*) FROM duckdb_columns()
                     WHERE table_name = ? AND column_name IN ('workflow_id', 'first_at')",
                    [t.table],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(columns, 2, "{} is replaced by workflow and pruned by first_at", t.table);
        }
    }

    #[test]
    fn every_derived_table_and_what_builds_it_has_a_family() {
        for name in all().chain(PER_WORKFLOW.iter().map(|t| t.rows)).chain(ROLLUPS.iter().map(|r| r.delta)) {
            let name =
                if PER_WORKFLOW.iter().any(|t| t.rows == name) { format!("new_{name}") } else { name.into() };
            assert!(family_of(&name).is_some(), "{name}");
        }
        assert_eq!(family_of("temp.new_steps"), Some("steps"));
        assert_eq!(family_of("r_finding_sets"), Some("finding rollups"));
        assert_eq!(family_of("total_shapes"), Some("shapes"));
        assert_eq!(family_of("attempts"), None);
    }
}
