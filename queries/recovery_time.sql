-- recovery_time.sql: time spent waiting and retrying (docs/record-format.md,
-- "Waste, cost, amplification"): from the first attempt's start to the delivered attempt's start,
-- for workflows that were delivered after more than one attempt.
-- Parameters: none (reads temp.scope_workflows, built by scope.sql).
-- Columns:
--   outcome     'all', 'retry_recovery', 'fallback_recovery' (always three rows)
--   workflows   recovered workflows
--   total_ms, mean_ms, p50_ms, p99_ms, max_ms   (nearest-rank percentiles; NULL when none)
-- Integer microseconds, so the sums are exact in any order.
WITH grouped AS (
    SELECT coalesce(outcome, 'all') AS outcome, count(*) AS workflows,
           sum(us)::DOUBLE / 1000 AS total_ms,
           sum(us)::DOUBLE / count(*) / 1000 AS mean_ms,
           list_sort(list(us))[greatest(1, ceil(0.50 * count(*)))::BIGINT]::DOUBLE / 1000 AS p50_ms,
           list_sort(list(us))[greatest(1, ceil(0.99 * count(*)))::BIGINT]::DOUBLE / 1000 AS p99_ms,
           max(us)::DOUBLE / 1000 AS max_ms
    FROM temp.scope_recovered
    GROUP BY GROUPING SETS ((), (outcome))
)
SELECT k.outcome, coalesce(g.workflows, 0) AS workflows, g.total_ms, g.mean_ms, g.p50_ms, g.p99_ms, g.max_ms
FROM (VALUES ('all', 1), ('retry_recovery', 2), ('fallback_recovery', 3)) k(outcome, ord)
LEFT JOIN grouped g USING (outcome)
ORDER BY k.ord;
