-- outcomes.sql: workflow outcomes (docs/record-format.md, "Outcomes"), overall and
-- per workflow name.
-- Parameters: none (reads temp.scope_workflows and temp.scope_attempts, built by scope.sql).
-- Columns:
--   is_total          true on the one row over every workflow in scope
--   workflow_name     the workflow's name; NULL on the total row and for unnamed workflows
--   workflows         workflows in the group
--   primary_success, retry_recovery, fallback_recovery, degraded, fail_closed,
--   queued, in_flight workflows with that outcome
--   attempts, wasted_attempts  attempts of those workflows; those not delivered
--   cost_pusd, wasted_cost_pusd known cost of them (pico-USD)
WITH counts AS (
    SELECT grouping(workflow_name) = 1 AS is_total,
           workflow_name,
           coalesce(sum(workflows), 0)::BIGINT AS workflows,
           coalesce(sum(workflows) FILTER (WHERE outcome = 'primary_success'), 0)::BIGINT   AS primary_success,
           coalesce(sum(workflows) FILTER (WHERE outcome = 'retry_recovery'), 0)::BIGINT    AS retry_recovery,
           coalesce(sum(workflows) FILTER (WHERE outcome = 'fallback_recovery'), 0)::BIGINT AS fallback_recovery,
           coalesce(sum(workflows) FILTER (WHERE outcome = 'degraded'), 0)::BIGINT          AS degraded,
           coalesce(sum(workflows) FILTER (WHERE outcome = 'fail_closed'), 0)::BIGINT       AS fail_closed,
           coalesce(sum(workflows) FILTER (WHERE outcome = 'queued'), 0)::BIGINT            AS queued,
           coalesce(sum(workflows) FILTER (WHERE outcome = 'in_flight'), 0)::BIGINT         AS in_flight
    FROM temp.scope_workflows
    GROUP BY GROUPING SETS ((), (workflow_name))
),
spend AS (
    SELECT grouping(workflow_name) = 1 AS is_total,
           workflow_name,
           coalesce(sum(attempts), 0)::BIGINT AS attempts,
           coalesce(sum(attempts) FILTER (WHERE NOT delivered), 0)::BIGINT AS wasted_attempts,
           coalesce(sum(cost_pusd), 0)::HUGEINT AS cost_pusd,
           coalesce(sum(cost_pusd) FILTER (WHERE NOT delivered), 0)::HUGEINT AS wasted_cost_pusd
    FROM temp.scope_attempts
    GROUP BY GROUPING SETS ((), (workflow_name))
)
SELECT c.*, s.attempts, s.wasted_attempts, s.cost_pusd, s.wasted_cost_pusd
FROM counts c
JOIN spend s ON s.is_total = c.is_total AND s.workflow_name IS NOT DISTINCT FROM c.workflow_name
ORDER BY c.is_total DESC, c.workflow_name NULLS LAST;
