-- fallbacks.sql: fallback activations: workflows that sent at least one
-- attempt to a route other than their primary, by primary route, first
-- fallback route and reason.
-- Parameters: none (reads temp.scope_fallbacks, built by scope.sql).
-- Columns:
--   primary_provider, primary_model     the workflows' primary route
--   fallback_provider, fallback_model   the route of their first fallback attempt
--   reason        error class of the last failed attempt before that attempt
--                 ('none' when nothing had failed: an open circuit, a policy)
--   workflows     activations (one per workflow)
--   recovered     of those, workflows whose outcome is fallback_recovery
SELECT primary_provider, primary_model, fallback_provider, fallback_model, reason,
       count(*) AS workflows,
       count(*) FILTER (WHERE outcome = 'fallback_recovery') AS recovered
FROM temp.scope_fallbacks
GROUP BY ALL
ORDER BY workflows DESC, primary_provider, primary_model, fallback_provider, fallback_model, reason;
