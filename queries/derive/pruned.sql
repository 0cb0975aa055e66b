-- pruned.sql: what a prune deletes: the workflows whose first attempt
-- started before prune_before, and the traces their attempts came from
-- (whenever those spans arrived: a span kept because it came late would
-- derive the pruned attempts again beside it).
-- Parameters: the variable prune_before (TIMESTAMP).
-- Columns of temp.pruned: workflow_id VARCHAR, earliest_at TIMESTAMP,
--   last_at TIMESTAMP; of temp.pruned_traces: trace_id VARCHAR. Sets the
--   variable prune_last (TIMESTAMP: the latest attempt pruned, NULL when
--   none).
CREATE OR REPLACE TEMP TABLE pruned AS
SELECT workflow_id, earliest_at, last_at FROM workflow_facts
WHERE first_at < getvariable('prune_before');
SET VARIABLE prune_last = (SELECT max(last_at) FROM temp.pruned);
CREATE OR REPLACE TEMP TABLE pruned_traces AS
SELECT DISTINCT source_trace AS trace_id FROM attempts
WHERE started_at <= getvariable('prune_last') AND source_trace IS NOT NULL
  AND workflow_id IN (SELECT workflow_id FROM temp.pruned);
