-- outcomes.sql: workflow outcomes (attempt-record.md section 4), overall and
-- per workflow name.
-- Parameters: none (reads temp.scope, built by scope.sql).
-- Columns:
--   is_total          true on the one row over every workflow in scope
--   workflow_name     the workflow's name; NULL on the total row and for unnamed workflows
--   workflows         workflows in the group
--   primary_success, retry_recovery, fallback_recovery, degraded, fail_closed,
--   queued, in_flight workflows with that outcome
--   attempts, wasted_attempts  attempts of those workflows; those not delivered
--   cost_pusd, wasted_cost_pusd known cost of them (pico-USD)
WITH per_workflow AS (
    SELECT workflow_id,
           any_value(workflow_name) AS workflow_name,
           any_value(outcome) AS outcome,
           count(*) AS attempts,
           count(*) FILTER (WHERE NOT delivered) AS wasted_attempts,
           coalesce(sum(cost_pusd_eff), 0) AS cost_pusd,
           coalesce(sum(cost_pusd_eff) FILTER (WHERE NOT delivered), 0) AS wasted_cost_pusd
    FROM temp.scope
    GROUP BY workflow_id
)
SELECT grouping(workflow_name) = 1 AS is_total,
       workflow_name,
       count(*) AS workflows,
       count(*) FILTER (WHERE outcome = 'primary_success')   AS primary_success,
       count(*) FILTER (WHERE outcome = 'retry_recovery')    AS retry_recovery,
       count(*) FILTER (WHERE outcome = 'fallback_recovery') AS fallback_recovery,
       count(*) FILTER (WHERE outcome = 'degraded')          AS degraded,
       count(*) FILTER (WHERE outcome = 'fail_closed')       AS fail_closed,
       count(*) FILTER (WHERE outcome = 'queued')            AS queued,
       count(*) FILTER (WHERE outcome = 'in_flight')         AS in_flight,
       sum(attempts)::BIGINT         AS attempts,
       sum(wasted_attempts)::BIGINT  AS wasted_attempts,
       coalesce(sum(cost_pusd), 0)::HUGEINT        AS cost_pusd,
       coalesce(sum(wasted_cost_pusd), 0)::HUGEINT AS wasted_cost_pusd
FROM per_workflow
GROUP BY GROUPING SETS ((), (workflow_name))
ORDER BY is_total DESC, workflow_name NULLS LAST;
