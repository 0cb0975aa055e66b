-- fallbacks.sql: fallback activations: workflows that sent at least one
-- attempt to a route other than their primary, by primary route, first
-- fallback route and reason.
-- Parameters: none (reads temp.scope_workflows, built by scope.sql).
-- Routes are keys as in routes.sql: a route group when there is one (then
-- its provider and model are NULL), else provider and model.
-- Columns:
--   primary_route_group, primary_provider, primary_model      the workflows' primary route
--   fallback_route_group, fallback_provider, fallback_model   the route of their first fallback attempt
--   reason        error class of the last failed attempt before that attempt
--                 ('none' when nothing had failed: an open circuit, a policy)
--   workflows     activations (one per workflow)
--   recovered     of those, workflows whose outcome is fallback_recovery
SELECT primary_route_group,
       CASE WHEN primary_route_group IS NULL THEN primary_provider END AS primary_provider,
       CASE WHEN primary_route_group IS NULL THEN primary_model END AS primary_model,
       fallback_route_group,
       CASE WHEN fallback_route_group IS NULL THEN fallback_provider END AS fallback_provider,
       CASE WHEN fallback_route_group IS NULL THEN fallback_model END AS fallback_model,
       fallback_reason AS reason,
       sum(workflows)::BIGINT AS workflows,
       coalesce(sum(workflows) FILTER (WHERE outcome = 'fallback_recovery'), 0)::BIGINT AS recovered
FROM temp.scope_workflows
WHERE fallback_reason IS NOT NULL
GROUP BY 1, 2, 3, 4, 5, 6, 7
ORDER BY workflows DESC, primary_route_group NULLS FIRST, primary_provider, primary_model,
         fallback_route_group NULLS FIRST, fallback_provider, fallback_model, reason;
