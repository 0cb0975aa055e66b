-- The attempts of workflows with more than one, each with its place and its
-- start after the workflow's first (findings of kind `attempt`): what a
-- policy's attempt, time and extra-cost budgets are checked against when
-- reading. NULL for the other kinds.
ALTER TABLE workflow_findings ADD COLUMN seq BIGINT;
ALTER TABLE workflow_findings ADD COLUMN offset_ms DOUBLE;

UPDATE derived_state SET stale = true;
