-- old_facts.sql: the stored facts of the workflows a write touched, looked
-- for near the write's own start times first (zone maps on first_at prune
-- the rest of workflow_facts).
-- Parameters: temp.touched_known (workflow_id VARCHAR: the touched
--   workflows that may have facts already); the variables look_from and
--   look_until (TIMESTAMP: the write's start times, widened by a margin).
-- Columns of temp.old_facts: those of workflow_facts.
CREATE OR REPLACE TEMP TABLE old_facts AS
SELECT * FROM workflow_facts
WHERE first_at >= getvariable('look_from') AND first_at <= getvariable('look_until')
  AND workflow_id IN (SELECT workflow_id FROM temp.touched_known);
