-- recovery_time.sql: time spent waiting and retrying (docs/record-format.md,
-- "Recovery time"): from the first attempt's start to the delivered attempt's
-- start, for workflows that were delivered after more than one attempt.
-- Parameters: the variable recovery_buckets (BIGINT[], the histogram's
--   bounds, microseconds); reads temp.scope_recovery (scope.sql).
-- Columns:
--   outcome     'all', 'retry_recovery', 'fallback_recovery' (always three rows)
--   workflows   recovered workflows
--   total_ms, mean_ms   exact (integer microseconds summed)
--   p50_ms, p99_ms, max_ms   the upper bound of the histogram bucket holding
--               the nearest-rank percentile (the largest: max); in the open
--               bucket above the last bound, that last bound (a floor)
--   NULL when none.
WITH buckets AS (
    SELECT coalesce(outcome, 'all') AS outcome, le_us, sum(workflows)::BIGINT AS workflows,
           sum(sum_us)::HUGEINT AS sum_us
    FROM temp.scope_recovery
    GROUP BY GROUPING SETS ((le_us), (outcome, le_us))
),
ranked AS (
    SELECT *, coalesce(le_us, getvariable('recovery_buckets')[-1]) AS bound_us,
           sum(workflows) OVER (PARTITION BY outcome ORDER BY le_us ASC NULLS LAST
                                ROWS UNBOUNDED PRECEDING) AS below,
           sum(workflows) OVER (PARTITION BY outcome) AS n
    FROM buckets
    WHERE workflows > 0
),
grouped AS (
    SELECT outcome, max(n)::BIGINT AS workflows,
           sum(sum_us)::DOUBLE / 1000 AS total_ms,
           sum(sum_us)::DOUBLE / max(n) / 1000 AS mean_ms,
           min(bound_us) FILTER (WHERE below >= greatest(1, ceil(0.50 * n)))::DOUBLE / 1000 AS p50_ms,
           min(bound_us) FILTER (WHERE below >= greatest(1, ceil(0.99 * n)))::DOUBLE / 1000 AS p99_ms,
           max(bound_us)::DOUBLE / 1000 AS max_ms
    FROM ranked
    GROUP BY outcome
)
SELECT k.outcome, coalesce(g.workflows, 0) AS workflows, g.total_ms, g.mean_ms, g.p50_ms, g.p99_ms, g.max_ms
FROM (VALUES ('all', 1), ('retry_recovery', 2), ('fallback_recovery', 3)) k(outcome, ord)
LEFT JOIN grouped g USING (outcome)
ORDER BY k.ord;
