-- groups.sql: outcomes and cost by one dimension (`report --group-by NAME`;
-- docs/record-format.md, "Dimensions"). A workflow counts under the first
-- value its attempts carry; values beyond the first K read 'other'.
-- Parameters: the variable group_slot (1, 2 or 3: which of dim1..dim3 the
--   dimension fills); reads temp.scope_workflows and temp.scope_attempts
--   (scope.sql).
-- Columns:
--   value              the dimension's value; NULL for workflows without one
--   workflows          workflows in the group
--   primary_success, retry_recovery, fallback_recovery, degraded, fail_closed,
--   queued, in_flight  workflows with that outcome
--   attempts, wasted_attempts  attempts of those workflows; those not delivered
--   cost_pusd, wasted_cost_pusd  known cost of them (pico-USD)
--   unknown_cost_attempts      attempts whose cost is unknown
WITH counts AS (
    SELECT CASE getvariable('group_slot') WHEN 1 THEN dim1 WHEN 2 THEN dim2 ELSE dim3 END AS value,
           coalesce(sum(workflows), 0)::BIGINT AS workflows,
           coalesce(sum(workflows) FILTER (WHERE outcome = 'primary_success'), 0)::BIGINT   AS primary_success,
           coalesce(sum(workflows) FILTER (WHERE outcome = 'retry_recovery'), 0)::BIGINT    AS retry_recovery,
           coalesce(sum(workflows) FILTER (WHERE outcome = 'fallback_recovery'), 0)::BIGINT AS fallback_recovery,
           coalesce(sum(workflows) FILTER (WHERE outcome = 'degraded'), 0)::BIGINT          AS degraded,
           coalesce(sum(workflows) FILTER (WHERE outcome = 'fail_closed'), 0)::BIGINT       AS fail_closed,
           coalesce(sum(workflows) FILTER (WHERE outcome = 'queued'), 0)::BIGINT            AS queued,
           coalesce(sum(workflows) FILTER (WHERE outcome = 'in_flight'), 0)::BIGINT         AS in_flight
    FROM temp.scope_workflows
    GROUP BY 1
),
spend AS (
    SELECT CASE getvariable('group_slot') WHEN 1 THEN dim1 WHEN 2 THEN dim2 ELSE dim3 END AS value,
           coalesce(sum(attempts), 0)::BIGINT AS attempts,
           coalesce(sum(attempts) FILTER (WHERE NOT delivered), 0)::BIGINT AS wasted_attempts,
           coalesce(sum(cost_pusd), 0)::HUGEINT AS cost_pusd,
           coalesce(sum(cost_pusd) FILTER (WHERE NOT delivered), 0)::HUGEINT AS wasted_cost_pusd,
           coalesce(sum(unknown_cost_attempts), 0)::BIGINT AS unknown_cost_attempts
    FROM temp.scope_attempts
    GROUP BY 1
)
SELECT c.*, s.attempts, s.wasted_attempts, s.cost_pusd, s.wasted_cost_pusd, s.unknown_cost_attempts
FROM counts c
JOIN spend s ON s.value IS NOT DISTINCT FROM c.value
ORDER BY c.workflows DESC, c.value NULLS LAST;
