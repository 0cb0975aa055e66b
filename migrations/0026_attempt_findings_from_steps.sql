-- Findings of kind `attempt` (every attempt of a workflow with more than
-- one) were stored twice: as workflow_findings rows and as workflow_steps
-- rows. They are read from the steps now (queries/attempt_findings.sql), so
-- the steps take the one column only those findings had, and the findings
-- lose those rows and the columns only they filled. The rollups keep their
-- `attempt` rows, whose sums do not change: nothing is derived again.
ALTER TABLE workflow_steps ADD COLUMN prev_offset_ms DOUBLE;  -- latest offset_ms of the attempts before; NULL at seq 1
UPDATE workflow_steps s SET prev_offset_ms = f.prev_offset_ms
FROM workflow_findings f
WHERE f.kind = 'attempt' AND f.workflow_id = s.workflow_id AND f.seq = s.seq;
DELETE FROM workflow_findings WHERE kind = 'attempt';
ALTER TABLE workflow_findings DROP COLUMN seq;
ALTER TABLE workflow_findings DROP COLUMN offset_ms;
ALTER TABLE workflow_findings DROP COLUMN prev_offset_ms;
