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
       count(*) AS workflows,
       count(*) FILTER (WHERE outcome NOT IN ('queued', 'in_flight')) AS terminal,
       count(*) FILTER (WHERE outcome = 'primary_success')   AS primary_success,
       count(*) FILTER (WHERE outcome = 'retry_recovery')    AS retry_recovery,
       count(*) FILTER (WHERE outcome = 'fallback_recovery') AS fallback_recovery,
       count(*) FILTER (WHERE outcome = 'degraded')          AS degraded,
       count(*) FILTER (WHERE outcome = 'fail_closed')       AS fail_closed
FROM temp.scope_workflows
GROUP BY ALL
ORDER BY workflows DESC, primary_route_group NULLS FIRST, primary_provider, primary_model;
