-- fact_input.sql: what facts.sql derives from at a write: every attempt of
-- the touched workflows (but those quarantined), all of which lie between
-- the old facts' earliest and latest start and the write's.
-- Parameters: temp.touched (workflow_id VARCHAR); the variables fact_from
--   and fact_until (TIMESTAMP); temp.attempt_dims (the attempts with their
--   dimension values).
-- Columns of temp.fact_input: those of temp.attempt_dims.
CREATE OR REPLACE TEMP VIEW fact_input AS
SELECT * FROM temp.attempt_dims
WHERE started_at >= getvariable('fact_from') AND started_at <= getvariable('fact_until')
  AND workflow_id IN (SELECT workflow_id FROM temp.touched
                      WHERE workflow_id NOT IN (SELECT workflow_id FROM quarantine));
