-- prune_attempts.sql: deletes the attempts of the pruned workflows (one
-- statement, so that its count is the number of attempts pruned).
-- Parameters: temp.pruned and the variable prune_last (pruned.sql).
-- Columns: none; the count of rows deleted.
DELETE FROM attempts
WHERE started_at <= getvariable('prune_last')
  AND workflow_id IN (SELECT workflow_id FROM temp.pruned)
