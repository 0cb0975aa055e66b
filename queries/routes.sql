-- routes.sql: outcomes by the workflows' primary route. Final success can stay
-- high while fallbacks hide a failing primary; this is where it shows.
-- Parameters: none (reads temp.scope_workflows, built by scope.sql).
-- A route is its key: the route group when the workflows' primary attempts
-- had one (then provider and model are NULL: a group spans deployments),
-- else provider and model.
-- Columns:
--   primary_route_group                the group, or NULL
--   primary_provider, primary_model   the route the workflows were meant to use (NULL for a group)
--   workflows          workflows in scope with that primary route
--   terminal           those with a terminal outcome (the rates' denominator)
--   primary_success, retry_recovery, fallback_recovery, degraded, fail_closed
--                      terminal workflows with that outcome
SELECT primary_route_group,
       CASE WHEN primary_route_group IS NULL THEN primary_provider END AS primary_provider,
       CASE WHEN primary_route_group IS NULL THEN primary_model END AS primary_model,
       sum(workflows)::BIGINT AS workflows,
       coalesce(sum(workflows) FILTER (WHERE outcome NOT IN ('queued', 'in_flight')), 0)::BIGINT AS terminal,
       coalesce(sum(workflows) FILTER (WHERE outcome = 'primary_success'), 0)::BIGINT   AS primary_success,
       coalesce(sum(workflows) FILTER (WHERE outcome = 'retry_recovery'), 0)::BIGINT    AS retry_recovery,
       coalesce(sum(workflows) FILTER (WHERE outcome = 'fallback_recovery'), 0)::BIGINT AS fallback_recovery,
       coalesce(sum(workflows) FILTER (WHERE outcome = 'degraded'), 0)::BIGINT          AS degraded,
       coalesce(sum(workflows) FILTER (WHERE outcome = 'fail_closed'), 0)::BIGINT       AS fail_closed
FROM temp.scope_workflows
GROUP BY 1, 2, 3
ORDER BY workflows DESC, primary_route_group NULLS FIRST, primary_provider, primary_model;
