-- amplification.sql: attempts per workflow, all layers and split by layer
-- (docs/record-format.md, "Waste, cost, amplification"). An app's max_retries of 3 is not 3 calls
-- when the SDK and the gateway retry under it.
-- Parameters: none (reads temp.scope_workflows, built by scope.sql).
-- Columns:
--   layer        'all', then sdk, gateway, app, queue (every layer, always)
--   attempts     attempts of that layer
--   workflows    workflows in scope (the denominator of every row)
--   mean         attempts / workflows
--   p50, p99     nearest-rank percentiles of attempts per workflow: the
--                smallest count n such that ceil(q * workflows) workflows have
--                at most n (a workflow with none of a layer's attempts counts 0)
--   max
WITH long AS (
    UNPIVOT (SELECT workflows, n_all, n_sdk, n_gateway, n_app, n_queue FROM temp.scope_workflows)
    ON n_all, n_sdk, n_gateway, n_app, n_queue INTO NAME layer VALUE n
),
-- Attempt counts are small integers: a histogram replaces a sort.
histogram AS (
    SELECT layer, n, sum(workflows) AS workflows_with_n FROM long GROUP BY layer, n
),
cumulative AS (
    SELECT layer, n,
           sum(workflows_with_n) OVER (PARTITION BY layer ORDER BY n) AS at_most_n,
           sum(workflows_with_n) OVER (PARTITION BY layer) AS workflows,
           sum(n * workflows_with_n) OVER (PARTITION BY layer) AS attempts
    FROM histogram
)
SELECT replace(layer, 'n_', '') AS layer,
       any_value(attempts)::BIGINT AS attempts,
       any_value(workflows)::BIGINT AS workflows,
       any_value(attempts)::DOUBLE / any_value(workflows) AS mean,
       min(n) FILTER (WHERE at_most_n >= ceil(0.50 * workflows)) AS p50,
       min(n) FILTER (WHERE at_most_n >= ceil(0.99 * workflows)) AS p99,
       max(n) AS max
FROM cumulative
GROUP BY layer
ORDER BY list_position(['n_all', 'n_sdk', 'n_gateway', 'n_app', 'n_queue'], layer);
