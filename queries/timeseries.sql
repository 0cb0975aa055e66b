-- timeseries.sql: the charts of the dashboard and GET /api/v1/timeseries:
-- per bucket of whole minutes, workflows by outcome (in the minute of their
-- first attempt, as the report counts them); their attempts and cost by who
-- was asked and who served, by layer; retries against first attempts in
-- the minute each attempt started (as the retry budget counts them); the
-- latency and time-to-first-token histograms; and, in the minute each
-- attempt started, the lowest rate-limit headroom its response stated and
-- the 429s by the limit they hit (docs/record-format.md, "Headroom").
-- Parameters: variables ts_from and ts_until (TIMESTAMP, whole minutes: the
--   buckets cover [ts_from, ts_until); workflows whose first attempt is in
--   it), ts_step (INTERVAL, whole minutes), ts_workflow (VARCHAR or NULL: a
--   workflow name; one beyond the first K values is summed under 'other' in
--   the rollups this reads), ts_route (VARCHAR or NULL: a provider; outcome
--   rows keep workflows whose primary provider it is, the others attempts
--   asked of it), temp.prices and the macros of cost.sql.
-- Columns, long form (groups with nothing are absent):
--   bucket_us        the bucket's first minute, microseconds since the epoch (UTC)
--   kind             outcome | spend | retry | latency | headroom | rate_limit
--   key              outcome: the outcome; spend, headroom: the served
--                    provider; latency: the metric (duration | ttft);
--                    rate_limit: the limit kind (facts.sql)
--   workflows        outcome: workflows with that outcome
--   provider, served_model, layer
--                    spend: the provider asked, the model that served, the
--                    layer; headroom: the model that served
--   attempts, wasted_attempts, cost_pusd, wasted_cost_pusd,
--   wasted_tokens, unknown_cost_attempts
--                    spend: of those attempts (cost by cost.sql; unknown costs
--                    are counted, not priced; wasted tokens are input + output
--                    of attempts not delivered, as the report's waste share)
--   first_attempts, retries
--                    retry: bucketed by each attempt's own minute (an attempt
--                    after ts_until is in no bucket)
--   le, observations latency: a histogram bucket (upper bound in seconds, NULL
--                    above the last bound; not cumulative) and its count.
--                    Latency is not kept per workflow name: with ts_workflow
--                    set, no latency rows.
--   min_ratio        headroom: the lowest remaining / limit of any kind a
--                    response of an attempt started in the bucket stated (a
--                    limit of 0 or none states no share), read from the
--                    stored attempts (the rollups keep no minimum)
--   attempts         rate_limit: 429s of that kind, by the minute each started
WITH in_range AS (
    SELECT time_bucket(getvariable('ts_step'), minute, getvariable('ts_from')) AS bucket, *
    FROM rollup_workflows
    WHERE minute >= getvariable('ts_from') AND minute < getvariable('ts_until')
      AND (getvariable('ts_workflow') IS NULL OR workflow_name = getvariable('ts_workflow'))
      AND (getvariable('ts_route') IS NULL OR primary_provider = getvariable('ts_route'))
),
attempts_in_window AS (
    SELECT * FROM rollup_attempts r
    WHERE r.minute >= getvariable('ts_from') AND r.minute < getvariable('ts_until')
      AND (getvariable('ts_workflow') IS NULL OR r.workflow_name = getvariable('ts_workflow'))
      AND (getvariable('ts_route') IS NULL OR r.provider = getvariable('ts_route'))
),
attempts_priced AS (
    -- Priced once: the cost and why it is unknown both read `priced`.
    SELECT * FROM priced_rows(attempts_in_window)
),
attempts_in_range AS (
    SELECT time_bucket(getvariable('ts_step'), r.minute, getvariable('ts_from')) AS bucket,
           time_bucket(getvariable('ts_step'), r.attempt_minute, getvariable('ts_from')) AS attempt_bucket,
           r.* EXCLUDE (price, unpriced, region_dropped, as_of, priced),
           known_cost_of(r.cost_kind, r.emitter_cost_pusd, r.priced) AS cost_pusd,
           CASE WHEN unknown_reason_of(r.cost_kind, r.price, r.unpriced, r.priced) IS NOT NULL THEN r.attempts ELSE 0 END
               AS unknown_cost_attempts
    FROM attempts_priced r
),
headroom_in_range AS (
    SELECT time_bucket(getvariable('ts_step'), started_at, getvariable('ts_from')) AS bucket,
           served_provider, served_model,
           -- least() passes over NULLs: the kinds a response did not state.
           least(CASE WHEN ratelimit_limit_requests > 0
                      THEN ratelimit_remaining_requests / ratelimit_limit_requests END,
                 CASE WHEN ratelimit_limit_tokens > 0
                      THEN ratelimit_remaining_tokens / ratelimit_limit_tokens END,
                 CASE WHEN ratelimit_limit_input_tokens > 0
                      THEN ratelimit_remaining_input_tokens / ratelimit_limit_input_tokens END,
                 CASE WHEN ratelimit_limit_output_tokens > 0
                      THEN ratelimit_remaining_output_tokens / ratelimit_limit_output_tokens END) AS ratio
    FROM attempts
    WHERE started_at >= getvariable('ts_from') AND started_at < getvariable('ts_until')
      AND (getvariable('ts_workflow') IS NULL OR workflow = getvariable('ts_workflow'))
      AND (getvariable('ts_route') IS NULL OR provider = getvariable('ts_route'))
),
latency_in_range AS (
    SELECT time_bucket(getvariable('ts_step'), minute, getvariable('ts_from')) AS bucket, *
    FROM rollup_latency
    WHERE minute >= getvariable('ts_from') AND minute < getvariable('ts_until')
      AND getvariable('ts_workflow') IS NULL
      AND (getvariable('ts_route') IS NULL OR provider = getvariable('ts_route'))
)
SELECT epoch_us(bucket) AS bucket_us, 'outcome' AS kind, outcome AS key, sum(workflows)::BIGINT AS workflows,
       NULL AS provider, NULL AS served_model, NULL AS layer,
       NULL::BIGINT AS attempts, NULL::BIGINT AS wasted_attempts, NULL::HUGEINT AS cost_pusd,
       NULL::HUGEINT AS wasted_cost_pusd, NULL::HUGEINT AS wasted_tokens, NULL::BIGINT AS unknown_cost_attempts,
       NULL::BIGINT AS first_attempts, NULL::BIGINT AS retries, NULL::DOUBLE AS le, NULL::BIGINT AS observations,
       NULL::DOUBLE AS min_ratio
FROM in_range
GROUP BY ALL
HAVING sum(workflows) <> 0
UNION ALL
SELECT epoch_us(bucket), 'spend', served_provider, NULL, provider, served_model, layer,
       sum(attempts)::BIGINT,
       coalesce(sum(attempts) FILTER (WHERE NOT delivered), 0)::BIGINT,
       sum(cost_pusd)::HUGEINT,
       coalesce(sum(cost_pusd) FILTER (WHERE NOT delivered), 0)::HUGEINT,
       coalesce(sum(input_tokens::HUGEINT + output_tokens) FILTER (WHERE NOT delivered), 0)::HUGEINT,
       sum(unknown_cost_attempts)::BIGINT,
       NULL, NULL, NULL, NULL, NULL
FROM attempts_in_range
GROUP BY epoch_us(bucket), served_provider, provider, served_model, layer
HAVING sum(attempts) <> 0
UNION ALL
SELECT epoch_us(attempt_bucket), 'retry', NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL,
       coalesce(sum(attempts) FILTER (WHERE NOT retry), 0)::BIGINT,
       coalesce(sum(attempts) FILTER (WHERE retry), 0)::BIGINT,
       NULL, NULL, NULL
FROM attempts_in_range
WHERE attempt_bucket < getvariable('ts_until')
GROUP BY epoch_us(attempt_bucket)
HAVING sum(attempts) <> 0
UNION ALL
SELECT epoch_us(bucket), 'latency', metric, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       le, sum(observations)::BIGINT, NULL
FROM latency_in_range
GROUP BY epoch_us(bucket), metric, le
HAVING sum(observations) <> 0
UNION ALL
SELECT epoch_us(bucket), 'headroom', served_provider, NULL, NULL, served_model, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       min(ratio)
FROM headroom_in_range
WHERE ratio IS NOT NULL
GROUP BY epoch_us(bucket), served_provider, served_model
UNION ALL
SELECT epoch_us(attempt_bucket), 'rate_limit', limit_kind, NULL, NULL, NULL, NULL,
       sum(attempts)::BIGINT, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM attempts_in_range
WHERE limit_kind IS NOT NULL AND attempt_bucket < getvariable('ts_until')
GROUP BY epoch_us(attempt_bucket), limit_kind
ORDER BY bucket_us, kind, key, provider, served_model, layer, le NULLS LAST;
