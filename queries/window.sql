-- window.sql: which workflows a report covers, split into the whole minutes
-- the rollups answer and the edges the per-workflow facts answer. Windows
-- stay exact: a workflow counts where its first attempt started.
-- Not a report itself: it sets the connection's variables scope_* and
-- defines the macros in_whole_minutes(minute, name), in_window(first_at,
-- name) and in_edges(first_at, name) (a rollup row the rollups answer for;
-- a per-workflow row in the window; one the edges answer for), and builds the views temp.rollup_*source over the facts of the edge workflows,
-- for rollups.sql. Variables, not a table: DuckDB folds getvariable() into a
-- constant, so a time bound prunes row groups by their zone maps.
--
-- Parameters: one row in temp.scope_filter (a script of several statements
--   cannot bind `$n` parameters to each of them):
--   since    TIMESTAMP or NULL: first attempt started at or after
--   until    TIMESTAMP or NULL: first attempt started before
--   workflow VARCHAR or NULL: the workflow's name (`workflow` field)
--   unfold   BOOLEAN: read every workflow from the per-workflow tables,
--            names whole (an audit whose policy names a workflow the
--            rollups fold)
--   A workflow is selected as a whole, by its first attempt and its name, so
--   a window never cuts a workflow in two and changes its outcome.
-- Variables: scope_since, scope_until, scope_workflow, plus
--   scope_folded       unfold, or the workflow asked for is not among the
--                      names the rollups keep (labels.sql): every workflow
--                      in scope is read from the facts, and fold_labels is false
--   scope_everything   no time bound: the all-time totals answer
--   scope_whole_from, scope_whole_until   the whole minutes inside
--                  [since, until) (NULL: unbounded); none when from >= until
--   scope_has_edges    some workflow may be in_edges: false with no time
--                      bound, or bounds on whole minutes and no folding
--                      (store::queries then skips rollups.sql's scans)
-- Columns of temp.rollup_source, temp.rollup_spend_source,
--   temp.rollup_latency_source, temp.rollup_findings_source and
--   temp.rollup_steps_source: sign (1), then those of workflow_facts,
--   workflow_spend, workflow_latency, workflow_findings and workflow_steps,
--   for the workflows that started in [since, until) outside the whole
--   minutes (all of them when scope_folded).
SET VARIABLE scope_since = (SELECT since FROM temp.scope_filter);
SET VARIABLE scope_until = (SELECT until FROM temp.scope_filter);
SET VARIABLE scope_workflow = (SELECT workflow FROM temp.scope_filter);
-- A name beyond the first K is summed under 'other' in the rollups: only
-- the per-workflow facts can answer for it, and unfolded.
SET VARIABLE scope_folded = (
    SELECT unfold
           OR (workflow IS NOT NULL
               AND NOT EXISTS (SELECT 1 FROM label_values WHERE label = 'workflow' AND value = workflow))
    FROM temp.scope_filter);
SET VARIABLE fold_labels = NOT getvariable('scope_folded');
SET VARIABLE scope_everything = (SELECT since IS NULL AND until IS NULL FROM temp.scope_filter)
                                AND NOT getvariable('scope_folded');
-- The whole minutes inside [since, until): read from the rollups.
SET VARIABLE scope_whole_from = (
    SELECT CASE WHEN since = date_trunc('minute', since) THEN since
                ELSE date_trunc('minute', since) + INTERVAL 1 MINUTE END
    FROM temp.scope_filter);
SET VARIABLE scope_whole_until = (SELECT date_trunc('minute', until) FROM temp.scope_filter);
-- in_edges below is false for every row when this is.
SET VARIABLE scope_has_edges = NOT getvariable('scope_everything')
    AND (getvariable('scope_folded')
         OR getvariable('scope_whole_from') IS DISTINCT FROM getvariable('scope_since')
         OR getvariable('scope_whole_until') IS DISTINCT FROM getvariable('scope_until'));

-- A rollup row inside the window's whole minutes, of the workflow name asked for.
CREATE OR REPLACE TEMP MACRO in_whole_minutes(minute, name) AS
    NOT getvariable('scope_folded')
    AND (getvariable('scope_whole_from') IS NULL OR minute >= getvariable('scope_whole_from'))
    AND (getvariable('scope_whole_until') IS NULL OR minute < getvariable('scope_whole_until'))
    AND (getvariable('scope_workflow') IS NULL OR name = getvariable('scope_workflow'));

-- A per-workflow row outside them, in the window, of that name.
-- A per-workflow row in the window, of the workflow asked for.
CREATE OR REPLACE TEMP MACRO in_window(first_at, name) AS
    (getvariable('scope_since') IS NULL OR first_at >= getvariable('scope_since'))
    AND (getvariable('scope_until') IS NULL OR first_at < getvariable('scope_until'))
    AND (getvariable('scope_workflow') IS NULL OR name = getvariable('scope_workflow'));

CREATE OR REPLACE TEMP MACRO in_edges(first_at, name) AS
    NOT getvariable('scope_everything')
  AND in_window(first_at, name)
  AND (getvariable('scope_folded')
       OR NOT ((getvariable('scope_whole_from') IS NULL OR first_at >= getvariable('scope_whole_from'))
               AND (getvariable('scope_whole_until') IS NULL OR first_at < getvariable('scope_whole_until'))));

CREATE OR REPLACE TEMP VIEW rollup_source AS
SELECT 1::BIGINT AS sign, f.* FROM workflow_facts f WHERE in_edges(f.first_at, f.workflow_name);
CREATE OR REPLACE TEMP VIEW rollup_spend_source AS
SELECT 1::BIGINT AS sign, s.* FROM workflow_spend s WHERE in_edges(s.first_at, s.workflow_name);
CREATE OR REPLACE TEMP VIEW rollup_latency_source AS
SELECT 1::BIGINT AS sign, l.* FROM workflow_latency l WHERE in_edges(l.first_at, l.workflow_name);
CREATE OR REPLACE TEMP VIEW rollup_findings_source AS
SELECT 1::BIGINT AS sign, f.* FROM workflow_findings f WHERE in_edges(f.first_at, f.workflow_name);
CREATE OR REPLACE TEMP VIEW rollup_steps_source AS
SELECT 1::BIGINT AS sign, s.* FROM workflow_steps s WHERE in_edges(s.first_at, s.workflow_name);
