-- latency.sql: attempt duration and time-to-first-token percentiles by
-- requested route and status, from the histograms the facts keep (bounds:
-- model::LATENCY_BUCKETS, seconds). A percentile is the upper bound of the
-- bucket it falls in, as Prometheus' histogram_quantile would bound it:
-- exact to the bucket, never interpolated.
-- Parameters: none (the scope_* variables of window.sql; temp.r_latency of
--   rollups.sql).
-- Reads: total_latency (no time bound), rollup_latency (the window's whole
--   minutes) and temp.r_latency (its edges); for one workflow name,
--   workflow_latency in the window (the rollups do not keep names).
-- Columns:
--   provider, model      the requested route
--   status               ok | error
--   metric               duration | ttft
--   observations         attempts that reported it
--   p50_seconds, p90_seconds, p99_seconds
--                        the bucket bound at or under which that share of
--                        them fell (NULL: above the last bound)
--   mean_seconds         exact mean (the sums are kept to the microsecond)
WITH buckets AS (
    SELECT provider, model, status, metric, le, observations, sum_us FROM total_latency
    WHERE getvariable('scope_everything') AND getvariable('scope_workflow') IS NULL
    UNION ALL
    SELECT provider, model, status, metric, le, observations, sum_us FROM rollup_latency r
    WHERE NOT getvariable('scope_everything') AND getvariable('scope_workflow') IS NULL
      AND in_whole_minutes(r.minute, NULL)
    UNION ALL
    SELECT provider, model, status, metric, le, observations, sum_us FROM temp.r_latency
    WHERE getvariable('scope_workflow') IS NULL
    UNION ALL
    SELECT provider, model, status, metric, le, observations, sum_us FROM workflow_latency l
    WHERE getvariable('scope_workflow') IS NOT NULL AND in_window(l.first_at, l.workflow_name)
),
summed AS (
    SELECT provider, model, status, metric, le, sum(observations) AS n, sum(sum_us) AS sum_us
    FROM buckets
    GROUP BY ALL
),
cumulative AS (
    SELECT *,
           sum(n) OVER (PARTITION BY provider, model, status, metric ORDER BY le ASC NULLS LAST) AS upto,
           sum(n) OVER (PARTITION BY provider, model, status, metric) AS total
    FROM summed
)
SELECT provider, model, status, metric, any_value(total)::BIGINT AS observations,
       min(le) FILTER (WHERE upto >= 0.50 * total) AS p50_seconds,
       min(le) FILTER (WHERE upto >= 0.90 * total) AS p90_seconds,
       min(le) FILTER (WHERE upto >= 0.99 * total) AS p99_seconds,
       (sum(sum_us) / any_value(total) / 1e6)::DOUBLE AS mean_seconds
FROM cumulative
GROUP BY provider, model, status, metric
HAVING any_value(total) > 0
ORDER BY observations DESC, provider, model, status, metric;
