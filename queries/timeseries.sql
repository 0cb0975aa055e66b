-- timeseries.sql: the charts of the dashboard and GET /api/v1/timeseries:
-- per bucket of whole minutes, workflows by outcome (in the minute of their
-- first attempt, as the report counts them), and their attempts, retries,
-- known cost and wasted cost by the provider that served.
-- Parameters: variables ts_from and ts_until (TIMESTAMP, whole minutes: the
--   buckets cover [ts_from, ts_until)), ts_step (INTERVAL, whole minutes),
--   ts_workflow (VARCHAR or NULL: a workflow name; one beyond the first K
--   values is summed under 'other' in the rollups this reads), temp.prices
--   and the macros of cost.sql.
-- Columns, long form (buckets with nothing are absent):
--   bucket_us               the bucket's first minute, microseconds since the epoch (UTC)
--   kind                    outcome | served
--   key                     the outcome, or the served provider
--   workflows               kind outcome: workflows with that outcome
--   attempts, retries, cost_pusd, wasted_cost_pusd, unknown_cost_attempts
--                           kind served: of the attempts that provider served
--                           (cost by cost.sql; unknown costs are counted, not priced)
WITH in_range AS (
    SELECT time_bucket(getvariable('ts_step'), minute, getvariable('ts_from')) AS bucket, *
    FROM rollup_workflows
    WHERE minute >= getvariable('ts_from') AND minute < getvariable('ts_until')
      AND (getvariable('ts_workflow') IS NULL OR workflow_name = getvariable('ts_workflow'))
),
attempts_in_range AS (
    SELECT time_bucket(getvariable('ts_step'), r.minute, getvariable('ts_from')) AS bucket, r.*,
           known_cost_pusd(r.cost_kind, r.emitter_cost_pusd, r.input_tokens, r.cached_input_tokens,
                           r.cache_write_input_tokens, r.output_tokens, p.input_pusd, p.cached_input_pusd,
                           p.cache_write_pusd, p.output_pusd) AS cost_pusd,
           CASE WHEN cost_is_unknown(r.cost_kind, p.served_model) THEN r.attempts ELSE 0 END
               AS unknown_cost_attempts
    FROM rollup_attempts r
    LEFT JOIN temp.prices p ON p.served_provider = r.served_provider AND p.served_model = r.served_model
    WHERE r.minute >= getvariable('ts_from') AND r.minute < getvariable('ts_until')
      AND (getvariable('ts_workflow') IS NULL OR r.workflow_name = getvariable('ts_workflow'))
)
SELECT epoch_us(bucket) AS bucket_us, 'outcome' AS kind, outcome AS key, sum(workflows)::BIGINT AS workflows,
       NULL::BIGINT AS attempts, NULL::BIGINT AS retries, NULL::HUGEINT AS cost_pusd,
       NULL::HUGEINT AS wasted_cost_pusd, NULL::BIGINT AS unknown_cost_attempts
FROM in_range
GROUP BY ALL
HAVING sum(workflows) <> 0
UNION ALL
SELECT epoch_us(bucket) AS bucket_us, 'served' AS kind, served_provider AS key, NULL::BIGINT AS workflows,
       sum(attempts)::BIGINT AS attempts, (sum(attempts) FILTER (WHERE retry))::BIGINT AS retries,
       sum(cost_pusd)::HUGEINT AS cost_pusd,
       coalesce(sum(cost_pusd) FILTER (WHERE NOT delivered), 0)::HUGEINT AS wasted_cost_pusd,
       sum(unknown_cost_attempts)::BIGINT AS unknown_cost_attempts
FROM attempts_in_range
GROUP BY ALL
HAVING sum(attempts) <> 0
ORDER BY bucket_us, kind, key;
