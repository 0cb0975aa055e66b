-- pass_input.sql: what facts.sql derives from in a rebuild pass: every
-- attempt of the pass's workflows, all of which lie between their earliest
-- and latest start (both bounds prune row groups by zone maps).
-- Parameters: temp.pass_workflows (slab_workflows.sql, or ids);
--   temp.attempt_dims (the attempts with their dimension values).
-- Columns of temp.fact_input: those of temp.attempt_dims.
SET VARIABLE pass_from = (SELECT min(earliest) FROM temp.pass_workflows);
SET VARIABLE pass_until = (SELECT max(last) FROM temp.pass_workflows);
CREATE OR REPLACE TEMP VIEW fact_input AS
SELECT * FROM temp.attempt_dims
WHERE started_at >= getvariable('pass_from') AND started_at <= getvariable('pass_until')
  AND workflow_id IN (SELECT workflow_id FROM temp.pass_workflows);
