-- slab_workflows.sql: the workflows of one slab of a rebuild: those whose
-- earliest attempt lies in [slab_from, slab_until).
-- Parameters: temp.workflow_span (workflow_span.sql); the variables
--   slab_from and slab_until (TIMESTAMP; NULL is unbounded).
-- Columns of temp.pass_workflows: workflow_id VARCHAR, earliest TIMESTAMP,
--   last TIMESTAMP.
CREATE OR REPLACE TEMP TABLE pass_workflows AS
SELECT workflow_id, earliest, last FROM temp.workflow_span
WHERE (getvariable('slab_from') IS NULL OR earliest >= getvariable('slab_from'))
  AND (getvariable('slab_until') IS NULL OR earliest < getvariable('slab_until'));
