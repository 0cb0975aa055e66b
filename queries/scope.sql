-- scope.sql: what every report reads, assembled from the derived tables
-- (docs/record-format.md; the rules themselves are in facts.sql).
-- Not a report itself: it builds temp.scope_workflows, temp.scope_attempts,
-- temp.scope_minutes and temp.scope_recovery.
--
-- Parameters: the scope_* variables set by window.sql.
-- Reads: the scope_* variables (window.sql), total_* (no window: every stored
--   workflow), rollup_* (the window's whole minutes), temp.r_* (rollups.sql
--   over the window's edges, run before this), and
--   temp.prices (served_provider, served_model and price_key: what the
--   price table answered for each key the stored attempts have, its price,
--   unpriced, region_dropped and as_of: store::queries::load_prices), and
--   the macros of cost.sql (run before it).
-- Columns of temp.scope_workflows: those of total_workflows (workflows
--   counted by name, primary route, outcome, fallback and attempts per layer).
-- Columns of temp.scope_attempts: those of total_attempts, plus
--   cost_pusd              the group's known cost: the emitter's, else 0 for
--                          failures without tokens, else its tokens priced by
--                          the row of its served model, day, tier, prompt size
--                          and account
--   unknown_reason         why its cost is unknown (cost.sql's
--                          unknown_cost_reason; NULL: known)
--   unknown_cost_attempts  its attempts when the cost is unknown, else 0
--   region_unpriced_attempts  its attempts priced by an entry matched only
--                          once its served model's region was dropped
--   prices_as_of           the as-of day of the prices that priced it
-- Columns of temp.scope_minutes (a view): attempt_minute, retry, attempts.
-- Columns of temp.scope_recovery (a view): outcome, le_us (the recovery-time
--   bucket's upper bound, microseconds; NULL above the last), workflows,
--   sum_us: the recovered workflows in scope by bucket.
-- in_whole_minutes, in_window and in_edges are window.sql's.
CREATE OR REPLACE TEMP TABLE scope_workflows AS
SELECT * EXCLUDE (minute) FROM (
    SELECT r.* FROM rollup_workflows r
    WHERE NOT getvariable('scope_everything') AND in_whole_minutes(r.minute, r.workflow_name)
    UNION ALL BY NAME
    SELECT * FROM temp.r_workflows
)
UNION ALL BY NAME
SELECT t.* FROM total_workflows t
WHERE getvariable('scope_everything')
  AND (getvariable('scope_workflow') IS NULL OR t.workflow_name = getvariable('scope_workflow'));

-- Views, not tables: only the report sections that read them pay for them
-- (/metrics reads neither).
CREATE OR REPLACE TEMP VIEW scope_minutes AS
SELECT attempt_minute, retry, sum(attempts)::BIGINT AS attempts
FROM (
    SELECT r.attempt_minute, r.retry, r.attempts FROM rollup_attempts r
    WHERE in_whole_minutes(r.minute, r.workflow_name)
    UNION ALL
    SELECT attempt_minute, retry, attempts FROM temp.r_attempts
)
GROUP BY ALL;

CREATE OR REPLACE TEMP TABLE scope_attempts AS
WITH grouped AS (
    SELECT * EXCLUDE (minute, attempt_minute) FROM (
        SELECT r.* FROM rollup_attempts r
        WHERE NOT getvariable('scope_everything') AND in_whole_minutes(r.minute, r.workflow_name)
        UNION ALL BY NAME
        SELECT * FROM temp.r_attempts
    )
    UNION ALL BY NAME
    SELECT t.* FROM total_attempts t
    WHERE getvariable('scope_everything')
      AND (getvariable('scope_workflow') IS NULL OR t.workflow_name = getvariable('scope_workflow'))
)
-- The rule is cost.sql's; an unknown cost adds 0 here and is counted in
-- unknown_cost_attempts instead, by its reason.
SELECT * FROM costed_rows(grouped);

CREATE OR REPLACE TEMP VIEW scope_recovery AS
SELECT outcome, le_us, sum(workflows)::BIGINT AS workflows, sum(sum_us)::HUGEINT AS sum_us
FROM (
    SELECT r.outcome, r.le_us, r.workflows, r.sum_us FROM rollup_recovery r
    WHERE NOT getvariable('scope_everything') AND in_whole_minutes(r.minute, r.workflow_name)
    UNION ALL
    SELECT outcome, le_us, workflows, sum_us FROM temp.r_recovery
    UNION ALL
    SELECT t.outcome, t.le_us, t.workflows, t.sum_us FROM total_recovery t
    WHERE getvariable('scope_everything')
      AND (getvariable('scope_workflow') IS NULL OR t.workflow_name = getvariable('scope_workflow'))
)
GROUP BY ALL
HAVING sum(workflows) <> 0;
