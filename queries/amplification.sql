-- amplification.sql: attempts per workflow, all layers and split by layer
-- (attempt-record.md section 7). An app's max_retries of 3 is not 3 calls
-- when the SDK and the gateway retry under it.
-- Parameters: none (reads temp.scope).
-- Columns:
--   layer        'all', then sdk, gateway, app, queue (every layer, always)
--   attempts     attempts of that layer
--   workflows    workflows in scope (the denominator of every row)
--   mean         attempts / workflows
--   p50, p99     nearest-rank percentiles of attempts per workflow (a workflow
--                with none of a layer's attempts counts as 0 for that layer)
--   max
WITH per_workflow AS (
    SELECT workflow_id,
           count(*) AS n_all,
           count(*) FILTER (WHERE layer = 'sdk')     AS n_sdk,
           count(*) FILTER (WHERE layer = 'gateway') AS n_gateway,
           count(*) FILTER (WHERE layer = 'app')     AS n_app,
           count(*) FILTER (WHERE layer = 'queue')   AS n_queue
    FROM temp.scope
    GROUP BY workflow_id
),
long AS (
    UNPIVOT per_workflow ON n_all, n_sdk, n_gateway, n_app, n_queue INTO NAME layer VALUE n
)
SELECT replace(layer, 'n_', '') AS layer,
       sum(n)::BIGINT AS attempts,
       count(*) AS workflows,
       avg(n) AS mean,
       list_sort(list(n))[greatest(1, ceil(0.50 * count(*)))::BIGINT] AS p50,
       list_sort(list(n))[greatest(1, ceil(0.99 * count(*)))::BIGINT] AS p99,
       max(n) AS max
FROM long
GROUP BY layer
ORDER BY list_position(['n_all', 'n_sdk', 'n_gateway', 'n_app', 'n_queue'], layer);
