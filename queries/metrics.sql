-- metrics.sql: the stored-data half of GET /metrics, in long form: one row
-- per sample. src/metrics.rs gives each family its Prometheus name, type,
-- help text and which of the label columns it carries.
-- Parameters: none. Reads temp.scope_attempts and temp.scope_workflows
--   (scope.sql over every stored workflow: the all-time totals) and
--   total_latency (histograms: the bounds are src/metrics.rs LATENCY_BUCKETS,
--   applied when the facts were derived).
-- Columns:
--   family   attempts | attempt_errors | wasted_attempts | retries |
--            workflows_started | workflows | tokens | wasted_tokens | cost |
--            wasted_cost | unknown_cost_attempts | fallback_activations |
--            route_workflows | attempt_duration_seconds |
--            time_to_first_token_seconds | orphan_attempt_spans |
--            ambiguous_calls (these two from trace_gaps: what the traces'
--            shapes could not account for, as of their stored spans) |
--            served_attempts | served_attempt_errors (by served provider and
--            model, the error rate's two sides) |
--            ratelimit_remaining | ratelimit_limit (workflow_headroom: per
--            served route and limit kind, the latest statement of each billing
--            account summed over the accounts, of the statements within a
--            day of the newest stored one) |
--            circuit_state (circuit_timeline.sql: each route's current
--            state, 0 closed, 1 half_open, 2 open; the 200 routes changed
--            most recently, a bound on what clients can grow)
--   workflow, layer, provider, model, served_provider, status, error_class,
--   outcome, fallback_provider, fallback_model, token_type, reason, limit_kind,
--   route_group
--            (route_workflows: provider and model are the workflow's
--            primary route; reason: the error class that led to a fallback;
--            ratelimit_* and served_*: model is the served model; limit_kind
--            the kind; circuit_state: the route and its caller, never
--            folded to 'other', so one series is one breaker)
--            label values; NULL where the family has no such label, or the
--            record had no value (an unnamed workflow)
--   le       histogram rows: the upper bound of the bucket the row counts
--            (NULL above the last bound: +Inf); NULL in other families
--   value    the count or sum (cost in pico-USD); histogram rows: the count
--            of observations in that one bucket (not cumulative)
--   Label values beyond the first K of their label read 'other'.
--   seconds  histogram rows: the sum of those observations (each observation
--            counted to the microsecond, so totals stay exact under updates)
WITH latest_headroom AS (
    SELECT served_provider, served_model, kind,
           arg_max(last_remaining, {'at': last_at, 'workflow': workflow_id}) AS remaining,
           arg_max(last_limit, {'at': last_at, 'workflow': workflow_id}) AS "limit"
    FROM workflow_headroom
    -- Rows are appended by first_at: the bound prunes all but the last day.
    WHERE last_at IS NOT NULL
      AND first_at >= (SELECT max(first_at) FROM workflow_headroom) - INTERVAL 1 DAY
    GROUP BY served_provider, served_model, billing_account, kind
),
samples AS (
    SELECT 'attempts' AS family, workflow_name AS workflow, layer, provider, model, served_provider, status,
           sum(attempts)::HUGEINT AS value
    FROM temp.scope_attempts
    GROUP BY ALL
    UNION ALL BY NAME
    SELECT 'attempt_errors' AS family, workflow_name AS workflow, provider, model,
           coalesce(error_class, 'unknown') AS error_class, sum(attempts)::HUGEINT AS value
    FROM temp.scope_attempts
    WHERE status = 'error'
    GROUP BY ALL
    UNION ALL BY NAME
    SELECT 'wasted_attempts' AS family, workflow_name AS workflow, served_provider, sum(attempts)::HUGEINT AS value
    FROM temp.scope_attempts
    WHERE NOT delivered
    GROUP BY ALL
    UNION ALL BY NAME
    SELECT 'retries' AS family, workflow_name AS workflow, layer, sum(attempts)::HUGEINT AS value
    FROM temp.scope_attempts
    WHERE retry
    GROUP BY ALL
    UNION ALL BY NAME
    SELECT 'workflows_started' AS family, workflow_name AS workflow, sum(workflows)::HUGEINT AS value
    FROM temp.scope_workflows
    GROUP BY ALL
    UNION ALL BY NAME
    SELECT 'workflows' AS family, workflow_name AS workflow, outcome, sum(workflows)::HUGEINT AS value
    FROM temp.scope_workflows
    GROUP BY ALL
    UNION ALL BY NAME
    SELECT CASE WHEN wasted THEN 'wasted_tokens' ELSE 'tokens' END AS family, served_provider, token_type,
           sum(n)::HUGEINT AS value
    FROM (
        UNPIVOT (SELECT served_provider, false AS wasted,
                        input_tokens AS input, output_tokens AS output, cached_input_tokens AS cached_input,
                        cache_write_input_tokens AS cache_write_input,
                        reasoning_output_tokens AS reasoning_output
                 FROM temp.scope_attempts
                 UNION ALL
                 SELECT served_provider, true AS wasted, input_tokens, output_tokens, cached_input_tokens,
                        cache_write_input_tokens, reasoning_output_tokens
                 FROM temp.scope_attempts
                 WHERE NOT delivered)
        ON input, output, cached_input, cache_write_input, reasoning_output INTO NAME token_type VALUE n)
    GROUP BY ALL
    UNION ALL BY NAME
    SELECT 'cost' AS family, served_provider, coalesce(sum(cost_pusd), 0)::HUGEINT AS value
    FROM temp.scope_attempts
    GROUP BY ALL
    UNION ALL BY NAME
    SELECT 'wasted_cost' AS family, served_provider,
           coalesce(sum(cost_pusd) FILTER (WHERE NOT delivered), 0)::HUGEINT AS value
    FROM temp.scope_attempts
    GROUP BY ALL
    UNION ALL BY NAME
    SELECT 'unknown_cost_attempts' AS family, served_provider, sum(unknown_cost_attempts)::HUGEINT AS value
    FROM temp.scope_attempts
    GROUP BY ALL
    UNION ALL BY NAME
    SELECT 'fallback_activations' AS family, workflow_name AS workflow,
           primary_provider AS provider, primary_model AS model, fallback_provider, fallback_model,
           fallback_reason AS reason, sum(workflows)::HUGEINT AS value
    FROM temp.scope_workflows
    WHERE fallback_reason IS NOT NULL
    GROUP BY ALL
    UNION ALL BY NAME
    SELECT 'route_workflows' AS family, primary_provider AS provider, primary_model AS model, outcome,
           sum(workflows)::HUGEINT AS value
    FROM temp.scope_workflows
    GROUP BY ALL
    UNION ALL BY NAME
    SELECT 'attempt_duration_seconds' AS family, provider, model, status, le,
           sum(observations)::HUGEINT AS value, sum(sum_us)::DOUBLE / 1e6 AS seconds
    FROM total_latency
    WHERE metric = 'duration'
    GROUP BY ALL
    UNION ALL BY NAME
    SELECT 'time_to_first_token_seconds' AS family, provider, model, le,
           sum(observations)::HUGEINT AS value, sum(sum_us)::DOUBLE / 1e6 AS seconds
    FROM total_latency
    WHERE metric = 'ttft'
    GROUP BY ALL
    UNION ALL BY NAME
    SELECT 'orphan_attempt_spans' AS family, coalesce(sum(orphan_attempt_spans), 0)::HUGEINT AS value
    FROM trace_gaps
    UNION ALL BY NAME
    SELECT 'ambiguous_calls' AS family, coalesce(sum(ambiguous_calls), 0)::HUGEINT AS value
    FROM trace_gaps
    UNION ALL BY NAME
    SELECT 'served_attempts' AS family, served_provider, served_model AS model, sum(attempts)::HUGEINT AS value
    FROM temp.scope_attempts
    GROUP BY ALL
    UNION ALL BY NAME
    SELECT 'served_attempt_errors' AS family, served_provider, served_model AS model,
           coalesce(error_class, 'unknown') AS error_class, sum(attempts)::HUGEINT AS value
    FROM temp.scope_attempts
    WHERE status = 'error'
    GROUP BY ALL
    UNION ALL BY NAME
    SELECT 'ratelimit_remaining' AS family, served_provider, served_model AS model, kind AS limit_kind,
           sum(remaining)::HUGEINT AS value
    FROM latest_headroom
    GROUP BY ALL
    UNION ALL BY NAME
    -- The limit only where every account summed stated one with its remaining.
    SELECT 'ratelimit_limit' AS family, served_provider, served_model AS model, kind AS limit_kind,
           sum("limit")::HUGEINT AS value
    FROM latest_headroom
    GROUP BY ALL
    HAVING count(*) = count("limit")
    UNION ALL BY NAME
    SELECT 'circuit_state' AS family, workflow, provider, model, route_group, value
    FROM (
        SELECT workflow_name AS workflow, provider, model, route_group,
               CASE state WHEN 'closed' THEN 0 WHEN 'half_open' THEN 1 ELSE 2 END::HUGEINT AS value
        FROM temp.circuit_intervals
        WHERE "until" IS NULL
        ORDER BY "from" DESC, route_group, provider, model, workflow_name
        LIMIT 200
    )
)
-- Series beyond the first K values of a label are summed under 'other'
-- (labels.sql), after pricing, so every cost stays exact.
SELECT family, kept_label('workflow', workflow) AS workflow, layer, kept_label('provider', provider) AS provider,
       kept_label('model', model) AS model, kept_label('provider', served_provider) AS served_provider, status,
       error_class, outcome, kept_label('provider', fallback_provider) AS fallback_provider,
       kept_label('model', fallback_model) AS fallback_model, token_type, reason, limit_kind, NULL AS route_group,
       le, sum(value)::HUGEINT AS value, sum(seconds) AS seconds
FROM samples
WHERE family <> 'circuit_state'
GROUP BY ALL
UNION ALL BY NAME
SELECT family, workflow, provider, model, route_group, value, NULL::DOUBLE AS seconds
FROM samples
WHERE family = 'circuit_state';
