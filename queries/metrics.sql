-- metrics.sql: the stored-data half of GET /metrics, in long form: one row
-- per sample. src/metrics.rs gives each family its Prometheus name, type,
-- help text and which of the label columns it carries.
-- Parameters: none. Reads temp.scope, temp.scope_workflows and
--   temp.scope_fallbacks (scope.sql over every stored workflow) and
--   temp.metric_buckets (le DOUBLE: histogram bucket upper bounds, seconds).
-- Columns:
--   family   attempts | attempt_errors | wasted_attempts | retries |
--            workflows_started | workflows | tokens | wasted_tokens | cost |
--            wasted_cost | unknown_cost_attempts | fallback_activations |
--            attempt_duration_seconds | time_to_first_token_seconds
--   workflow, layer, provider, model, served_provider, status, error_class,
--   outcome, fallback_provider, fallback_model, token_type
--            label values; NULL where the family has no such label, or the
--            record had no value (an unnamed workflow)
--   le       histogram rows: the upper bound of the bucket the row counts
--            (NULL above the last bound: +Inf); NULL in other families
--   value    the count or sum (cost in pico-USD); histogram rows: the count
--            of observations in that one bucket (not cumulative)
--   seconds  histogram rows: the sum of those observations
SELECT 'attempts' AS family, workflow_name AS workflow, layer, provider, model, served_provider, status,
       count(*)::HUGEINT AS value
FROM temp.scope
GROUP BY ALL
UNION ALL BY NAME
SELECT 'attempt_errors' AS family, workflow_name AS workflow, provider, model,
       coalesce(error_class, 'unknown') AS error_class, count(*)::HUGEINT AS value
FROM temp.scope
WHERE status = 'error'
GROUP BY ALL
UNION ALL BY NAME
SELECT 'wasted_attempts' AS family, workflow_name AS workflow, served_provider, count(*)::HUGEINT AS value
FROM temp.scope
WHERE NOT delivered
GROUP BY ALL
UNION ALL BY NAME
SELECT 'retries' AS family, workflow_name AS workflow, layer, count(*)::HUGEINT AS value
FROM temp.scope
WHERE seq > 1
GROUP BY ALL
UNION ALL BY NAME
SELECT 'workflows_started' AS family, workflow_name AS workflow, count(*)::HUGEINT AS value
FROM temp.scope_workflows
GROUP BY ALL
UNION ALL BY NAME
SELECT 'workflows' AS family, workflow_name AS workflow, outcome, count(*)::HUGEINT AS value
FROM temp.scope_workflows
GROUP BY ALL
UNION ALL BY NAME
SELECT CASE WHEN wasted THEN 'wasted_tokens' ELSE 'tokens' END AS family, served_provider, token_type,
       sum(n)::HUGEINT AS value
FROM (
    UNPIVOT (SELECT served_provider, false AS wasted,
                    coalesce(input_tokens, 0) AS input, coalesce(output_tokens, 0) AS output,
                    coalesce(cached_input_tokens, 0) AS cached_input
             FROM temp.scope
             UNION ALL
             SELECT served_provider, true AS wasted,
                    coalesce(input_tokens, 0), coalesce(output_tokens, 0), coalesce(cached_input_tokens, 0)
             FROM temp.scope
             WHERE NOT delivered)
    ON input, output, cached_input INTO NAME token_type VALUE n)
GROUP BY ALL
UNION ALL BY NAME
SELECT 'cost' AS family, served_provider, coalesce(sum(cost_pusd_eff), 0)::HUGEINT AS value
FROM temp.scope
GROUP BY ALL
UNION ALL BY NAME
SELECT 'wasted_cost' AS family, served_provider,
       coalesce(sum(cost_pusd_eff) FILTER (WHERE NOT delivered), 0)::HUGEINT AS value
FROM temp.scope
GROUP BY ALL
UNION ALL BY NAME
SELECT 'unknown_cost_attempts' AS family, served_provider,
       count(*) FILTER (WHERE cost_pusd_eff IS NULL)::HUGEINT AS value
FROM temp.scope
GROUP BY ALL
UNION ALL BY NAME
SELECT 'fallback_activations' AS family, workflow_name AS workflow,
       primary_provider AS provider, primary_model AS model, fallback_provider, fallback_model,
       count(*)::HUGEINT AS value
FROM temp.scope_fallbacks
GROUP BY ALL
UNION ALL BY NAME
SELECT 'attempt_duration_seconds' AS family, d.provider, d.model, d.status, b.le,
       count(*)::HUGEINT AS value, sum(d.seconds) AS seconds
FROM (SELECT provider, model, status, duration_ms / 1000.0 AS seconds
      FROM temp.scope WHERE duration_ms IS NOT NULL) d
ASOF LEFT JOIN temp.metric_buckets b ON d.seconds <= b.le
GROUP BY ALL
UNION ALL BY NAME
SELECT 'time_to_first_token_seconds' AS family, d.provider, d.model, b.le,
       count(*)::HUGEINT AS value, sum(d.seconds) AS seconds
FROM (SELECT provider, model, ttft_ms / 1000.0 AS seconds
      FROM temp.scope WHERE ttft_ms IS NOT NULL) d
ASOF LEFT JOIN temp.metric_buckets b ON d.seconds <= b.le
GROUP BY ALL;
