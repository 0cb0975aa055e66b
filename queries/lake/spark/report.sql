-- spark/report.sql: the report of an attempt lake in Spark SQL (Spark 4,
-- Databricks): the lake's dedup (queries/lake/dedup.sql), then the rules
-- of queries/facts.sql and the report queries (outcomes.sql, waste.sql,
-- cost_by_served.sql, routes.sql, fallbacks.sql, amplification.sql), for
-- the sections the report's JSON names the same. scripts/lake-report.py
-- runs it statement by statement and shapes the results as `report
-- --format json` does. Rendered from
-- queries/rules/lake_spark_report.template.sql with the rules of
-- queries/rules/rules.sql: edit those, then render (docs/testing.md, "Rules").
-- Parameters (substituted as SQL literals; NULL when not given):
--   ${read_from}, ${read_until}  TIMESTAMP_NTZ: the rows read (the horizon
--                 around the window; NULL: every row)
--   ${since}, ${until}           TIMESTAMP_NTZ: workflows whose first attempt started in [since, until)
--   ${workflow}                  STRING: only workflows with this name
-- Reads: the temp views lake_rows (the lake's attempts files read with
--   mergeSchema, with the partition columns day and bucket, and an added
--   column no file holds yet as a typed NULL) and lake_price_rows (every
--   node's prices/<node>.parquet: the price table's answer per served
--   model and price key, as store::lake writes it).
-- Results, each after a `-- result: NAME` line:
--   copies        copies_read, attempts: rows read, rows left after dedup
--   outside       attempts_outside_horizon
--   outcomes      is_total, workflow_name, workflows, the seven outcomes,
--                 attempts, wasted_attempts, cost_pusd, wasted_cost_pusd
--   waste         waste.sql's columns
--   served        cost_by_served.sql's columns
--   routes        routes.sql's columns
--   fallbacks     fallbacks.sql's columns
--   amplification layer, attempts, workflows, p50, p99, max
-- Money is DECIMAL(38,0) pico-USD (DuckDB's HUGEINT): sums of BIGINT
-- products would overflow.

CREATE OR REPLACE TEMP VIEW lake_read AS
SELECT * FROM lake_rows
WHERE (${read_from} IS NULL OR (day >= CAST(${read_from} AS DATE) AND started_at >= ${read_from}))
  AND (${read_until} IS NULL OR (day <= CAST(${read_until} AS DATE) AND started_at < ${read_until}));

-- Dedup, as queries/lake/dedup.sql: the newest revision of each trace on
-- its node, then the first stored copy of each attempt.
-- Only the columns the report reads are cached.
CACHE TABLE lake_attempts AS
SELECT attempt_id, workflow_id, started_at, attempt, layer, workflow, route, provider, model, route_group,
       decision, status, served_provider, served_model, error_class, input_tokens, output_tokens,
       cached_input_tokens, cache_write_input_tokens, reasoning_output_tokens, cost_pusd, cost_currency,
       batch, service_tier, billing_account, cache_write_1h_input_tokens, web_search_requests FROM (
    SELECT *, row_number() OVER (PARTITION BY attempt_id ORDER BY ingested_at, ingest_node, ingest_seq) AS copy_rank
    FROM (
        SELECT attempt_id, workflow_id, started_at, attempt, layer, workflow, route, provider, model, route_group,
               decision, status, served_provider, served_model, error_class, input_tokens, output_tokens,
               cached_input_tokens, cache_write_input_tokens, reasoning_output_tokens, cost_pusd, cost_currency,
               batch, service_tier, billing_account, cache_write_1h_input_tokens, web_search_requests,
               ingested_at, ingest_node, ingest_seq, source_trace,
               max(ingest_seq) OVER (PARTITION BY source_trace, ingest_node) AS trace_revision
        FROM lake_read
    )
    WHERE (source_trace IS NULL OR ingest_seq = trace_revision)
)
WHERE copy_rank = 1;

-- result: copies
SELECT (SELECT count(*) FROM lake_read) AS copies_read, (SELECT count(*) FROM lake_attempts) AS attempts;

-- The newest answer of the price table for each served model and price
-- key (every node ships the keys of its own attempts).
CREATE OR REPLACE TEMP VIEW lake_prices AS
SELECT served_provider, served_model, day, tier, over, account, priced, unpriced, input_pusd, cached_input_pusd,
       cache_write_pusd, cache_write_1h_pusd, output_pusd, reasoning_output_pusd, web_search_pusd, region_dropped,
       as_of FROM (
    SELECT *, row_number() OVER (PARTITION BY served_provider, served_model, day, tier, over, account
                                 ORDER BY exported_at DESC, ingest_node) AS r
    FROM lake_price_rows
)
WHERE r = 1;

-- facts.sql's order in a workflow: attempt NULLS LAST, started_at, status, attempt_id.
CACHE TABLE fact_ordered AS
SELECT workflow_id, attempt_id, started_at, layer, workflow, route, provider, model, route_group, decision, status,
       served_provider, served_model, error_class, input_tokens, output_tokens, cached_input_tokens,
       cache_write_input_tokens, reasoning_output_tokens, cost_pusd, cost_currency,
       batch, service_tier, billing_account, cache_write_1h_input_tokens, web_search_requests,
       row_number() OVER (PARTITION BY workflow_id
                          ORDER BY attempt ASC NULLS LAST, started_at, status, attempt_id) AS seq,
       coalesce(status = 'ok' AND (decision IS NULL OR decision NOT IN ('retry', 'fallback')), false) AS deliverable
FROM lake_attempts;

CACHE TABLE fact_workflows AS
WITH per_workflow AS (
    SELECT workflow_id,
           count(*) AS attempts,
           count_if(layer = 'sdk') AS n_sdk,
           count_if(layer = 'gateway') AS n_gateway,
           count_if(layer = 'app') AS n_app,
           count_if(layer = 'queue') AS n_queue,
           max(started_at) FILTER (WHERE seq = 1) AS first_at,
           min_by(workflow, seq) FILTER (WHERE workflow IS NOT NULL) AS workflow_name,
           coalesce(min_by(named_struct('provider', provider, 'model', model, 'route_group', route_group), seq)
                        FILTER (WHERE route = 'primary'),
                    min_by(named_struct('provider', provider, 'model', model, 'route_group', route_group), seq))
               AS primary_route,
           min_by(named_struct('seq', seq, 'provider', provider, 'model', model, 'route_group', route_group,
                               'route', route), seq) FILTER (WHERE deliverable) AS delivered,
           max_by(named_struct('decision', decision), seq).decision AS last_decision
    FROM fact_ordered
    GROUP BY workflow_id
)
SELECT workflow_id, workflow_name, first_at, attempts, n_sdk, n_gateway, n_app, n_queue,
       delivered.seq AS delivered_seq,
       primary_route.provider AS primary_provider, primary_route.model AS primary_model,
       primary_route.route_group AS primary_route_group,
       CASE WHEN delivered.seq = 1 THEN 'primary_success'
            WHEN delivered.seq IS NOT NULL THEN
                 CASE coalesce(delivered.route, CASE WHEN CASE WHEN delivered.route_group IS NOT NULL OR primary_route.route_group IS NOT NULL THEN coalesce(delivered.route_group = primary_route.route_group, false)
                                                               ELSE delivered.provider = primary_route.provider AND delivered.model = primary_route.model END
                                            THEN 'primary' ELSE 'fallback' END)
                      WHEN 'primary' THEN 'retry_recovery' ELSE 'fallback_recovery' END
            WHEN last_decision = 'degrade' THEN 'degraded'
            WHEN last_decision = 'queue' THEN 'queued'
            WHEN last_decision IN ('retry', 'fallback') THEN 'in_flight'
            ELSE 'fail_closed' END AS outcome
FROM per_workflow;

CACHE TABLE fact_attempts AS
SELECT o.*,
       coalesce(o.route, CASE WHEN CASE WHEN o.route_group IS NOT NULL OR w.primary_route_group IS NOT NULL THEN coalesce(o.route_group = w.primary_route_group, false)
                                        ELSE o.provider = w.primary_provider AND o.model = w.primary_model END
                             THEN 'primary' ELSE 'fallback' END) AS effective_route,
       coalesce(o.seq = w.delivered_seq, false) AS delivered,
       CASE WHEN o.cost_pusd IS NOT NULL THEN 'emitter'
            WHEN o.cost_currency IS NOT NULL THEN 'other_currency'
            WHEN o.status = 'error' AND coalesce(o.input_tokens, 0) = 0 AND coalesce(o.output_tokens, 0) = 0
                 AND coalesce(o.cached_input_tokens, 0) = 0 AND coalesce(o.cache_write_input_tokens, 0) = 0
                 AND coalesce(o.web_search_requests, 0) = 0
                 THEN 'free'
            WHEN o.status = 'ok' AND o.input_tokens IS NULL AND o.output_tokens IS NULL
                 AND o.cached_input_tokens IS NULL AND o.cache_write_input_tokens IS NULL
                 THEN 'unknown'
            ELSE 'priced' END AS cost_kind
FROM fact_ordered o
JOIN fact_workflows w ON w.workflow_id = o.workflow_id;

-- A fallback's route and reason: the first attempt off the primary route,
-- and the error class of the last failed attempt before it.
CACHE TABLE fact_fallbacks AS
WITH first_fallback AS (
    SELECT workflow_id, min(seq) AS fallback_seq FROM fact_attempts
    WHERE effective_route = 'fallback' GROUP BY workflow_id
)
SELECT a.workflow_id,
       coalesce(max_by(coalesce(a.error_class, 'unknown'), a.seq)
                    FILTER (WHERE a.status = 'error' AND a.seq < f.fallback_seq), 'none') AS fallback_reason,
       min_by(named_struct('provider', a.provider, 'model', a.model, 'route_group', a.route_group), a.seq)
           FILTER (WHERE a.seq = f.fallback_seq) AS route
FROM fact_attempts a
JOIN first_fallback f ON f.workflow_id = a.workflow_id
WHERE a.seq <= f.fallback_seq
GROUP BY a.workflow_id;

-- The workflows the report covers: by their first attempt and their name.
CACHE TABLE scope_workflows AS
SELECT w.*, f.fallback_reason,
       f.route.provider AS fallback_provider, f.route.model AS fallback_model,
       f.route.route_group AS fallback_route_group
FROM fact_workflows w
LEFT JOIN fact_fallbacks f ON f.workflow_id = w.workflow_id
WHERE (${since} IS NULL OR w.first_at >= ${since})
  AND (${until} IS NULL OR w.first_at < ${until})
  AND (${workflow} IS NULL OR w.workflow_name = ${workflow});

-- Their attempts, priced as queries/cost.sql prices (the emitter's cost,
-- else 0 for a failure without tokens or searches, else the tokens at the
-- price of the served model's key: its day, tier, prompt size and account;
-- unknown without usage, in another currency, or without a price), with
-- why a cost is unknown, whether its price was found only once the served
-- model's region was dropped, and the as-of day of the price that priced it.
CACHE TABLE scope_attempts AS
SELECT b.*,
       CASE WHEN b.unknown_reason IS NOT NULL THEN 1 ELSE 0 END AS unknown_cost,
       CASE WHEN b.unknown_reason IS NULL AND b.cost_kind = 'priced' AND b.region_dropped THEN 1 ELSE 0 END
           AS region_unpriced,
       CASE WHEN b.unknown_reason IS NULL AND b.cost_kind = 'priced' THEN b.as_of END AS prices_as_of
FROM (
SELECT a.*, w.workflow_name,
       coalesce(CASE a.cost_kind
                    WHEN 'emitter' THEN CAST(a.cost_pusd AS DECIMAL(38, 0))
                    WHEN 'priced' THEN a.priced
                    ELSE CAST(0 AS DECIMAL(38, 0)) END,
                CAST(0 AS DECIMAL(38, 0))) AS cost,
       CASE WHEN a.cost_kind = 'unknown' THEN 'no_usage'
            WHEN a.cost_kind = 'other_currency' THEN 'other_currency'
            WHEN a.cost_kind <> 'priced' THEN NULL
            WHEN NOT a.has_price THEN coalesce(a.unpriced, 'no_price')
            WHEN a.priced IS NULL THEN 'no_kind_price' END AS unknown_reason
FROM (
    SELECT a.*, coalesce(p.priced, false) AS has_price, p.unpriced, p.region_dropped, p.as_of,
           CASE WHEN p.priced THEN
                (CASE WHEN CAST(coalesce(a.input_tokens, 0) - coalesce(a.cached_input_tokens, 0)
                                                   - coalesce(a.cache_write_input_tokens, 0) AS DECIMAL(38, 0)) = 0 THEN 0 ELSE CAST(coalesce(a.input_tokens, 0) - coalesce(a.cached_input_tokens, 0)
                                                   - coalesce(a.cache_write_input_tokens, 0) AS DECIMAL(38, 0)) * p.input_pusd END
                 + CASE WHEN CAST(coalesce(a.cached_input_tokens, 0) AS DECIMAL(38, 0)) = 0 THEN 0 ELSE CAST(coalesce(a.cached_input_tokens, 0) AS DECIMAL(38, 0)) * p.cached_input_pusd END
                 + CASE WHEN CAST(coalesce(a.cache_write_input_tokens, 0) - coalesce(a.cache_write_1h_input_tokens, 0)
                                                   AS DECIMAL(38, 0)) = 0 THEN 0 ELSE CAST(coalesce(a.cache_write_input_tokens, 0) - coalesce(a.cache_write_1h_input_tokens, 0)
                                                   AS DECIMAL(38, 0)) * p.cache_write_pusd END
                 + CASE WHEN CAST(coalesce(a.cache_write_1h_input_tokens, 0) AS DECIMAL(38, 0)) = 0 THEN 0 ELSE CAST(coalesce(a.cache_write_1h_input_tokens, 0) AS DECIMAL(38, 0)) * p.cache_write_1h_pusd END
                 + CASE WHEN CAST(coalesce(a.output_tokens, 0) - coalesce(a.reasoning_output_tokens, 0)
                                                   AS DECIMAL(38, 0)) = 0 THEN 0 ELSE CAST(coalesce(a.output_tokens, 0) - coalesce(a.reasoning_output_tokens, 0)
                                                   AS DECIMAL(38, 0)) * p.output_pusd END
                 + CASE WHEN CAST(coalesce(a.reasoning_output_tokens, 0) AS DECIMAL(38, 0)) = 0 THEN 0 ELSE CAST(coalesce(a.reasoning_output_tokens, 0) AS DECIMAL(38, 0)) * p.reasoning_output_pusd END
                 + CASE WHEN CAST(coalesce(a.web_search_requests, 0) AS DECIMAL(38, 0)) = 0 THEN 0 ELSE CAST(coalesce(a.web_search_requests, 0) AS DECIMAL(38, 0)) * p.web_search_pusd END) END AS priced
    FROM fact_attempts a
    LEFT JOIN lake_prices p
      ON p.served_provider = a.served_provider AND p.served_model = a.served_model
     AND p.day = CAST(a.started_at AS DATE) AND p.tier = CASE WHEN coalesce(a.batch, false) THEN 'batch'
                                                              WHEN a.service_tier IS NULL OR lower(a.service_tier) IN ('', 'default', 'auto', 'standard', 'on_demand')
                                                                   THEN 'standard'
                                                              ELSE lower(a.service_tier) END
     AND p.over = CASE WHEN a.input_tokens > 1000000 THEN 1000000
                       WHEN a.input_tokens > 512000 THEN 512000
                       WHEN a.input_tokens > 272000 THEN 272000
                       WHEN a.input_tokens > 256000 THEN 256000
                       WHEN a.input_tokens > 200000 THEN 200000
                       WHEN a.input_tokens > 199999 THEN 199999
                       WHEN a.input_tokens > 128000 THEN 128000
                       WHEN a.input_tokens > 100000 THEN 100000
                       WHEN a.input_tokens > 64000 THEN 64000
                       WHEN a.input_tokens > 32000 THEN 32000
                       ELSE 0 END AND p.account <=> a.billing_account
) a
JOIN scope_workflows w ON w.workflow_id = a.workflow_id
) b;

-- result: outside
SELECT count(DISTINCT attempt_id) AS attempts_outside_horizon FROM lake_rows
WHERE NOT ((${read_from} IS NULL OR (day >= CAST(${read_from} AS DATE) AND started_at >= ${read_from}))
           AND (${read_until} IS NULL OR (day <= CAST(${read_until} AS DATE) AND started_at < ${read_until})))
  AND workflow_id IN (SELECT workflow_id FROM scope_workflows);

-- result: outcomes
WITH counts AS (
    SELECT grouping(workflow_name) = 1 AS is_total, workflow_name,
           count(*) AS workflows,
           count_if(outcome = 'primary_success') AS primary_success,
           count_if(outcome = 'retry_recovery') AS retry_recovery,
           count_if(outcome = 'fallback_recovery') AS fallback_recovery,
           count_if(outcome = 'degraded') AS degraded,
           count_if(outcome = 'fail_closed') AS fail_closed,
           count_if(outcome = 'queued') AS queued,
           count_if(outcome = 'in_flight') AS in_flight
    FROM scope_workflows
    GROUP BY GROUPING SETS ((), (workflow_name))
),
spend AS (
    SELECT grouping(workflow_name) = 1 AS is_total, workflow_name,
           count(*) AS attempts,
           count_if(NOT delivered) AS wasted_attempts,
           coalesce(sum(cost), 0) AS cost_pusd,
           coalesce(sum(CASE WHEN NOT delivered THEN cost END), 0) AS wasted_cost_pusd
    FROM scope_attempts
    GROUP BY GROUPING SETS ((), (workflow_name))
)
SELECT c.*, coalesce(s.attempts, 0) AS attempts, coalesce(s.wasted_attempts, 0) AS wasted_attempts,
       coalesce(s.cost_pusd, 0) AS cost_pusd, coalesce(s.wasted_cost_pusd, 0) AS wasted_cost_pusd
FROM counts c
LEFT JOIN spend s ON s.is_total = c.is_total AND s.workflow_name <=> c.workflow_name
ORDER BY c.is_total DESC, c.workflow_name ASC NULLS LAST;

-- result: waste
SELECT count(*) AS attempts,
       count_if(NOT delivered) AS wasted_attempts,
       coalesce(sum(input_tokens), 0) AS input_tokens,
       coalesce(sum(output_tokens), 0) AS output_tokens,
       coalesce(sum(cached_input_tokens), 0) AS cached_input_tokens,
       coalesce(sum(cache_write_input_tokens), 0) AS cache_write_input_tokens,
       coalesce(sum(CASE WHEN NOT delivered THEN input_tokens END), 0) AS wasted_input_tokens,
       coalesce(sum(CASE WHEN NOT delivered THEN output_tokens END), 0) AS wasted_output_tokens,
       coalesce(sum(CASE WHEN NOT delivered THEN cached_input_tokens END), 0) AS wasted_cached_input_tokens,
       coalesce(sum(CASE WHEN NOT delivered THEN cache_write_input_tokens END), 0) AS wasted_cache_write_input_tokens,
       coalesce(sum(reasoning_output_tokens), 0) AS reasoning_output_tokens,
       coalesce(sum(CASE WHEN NOT delivered THEN reasoning_output_tokens END), 0) AS wasted_reasoning_output_tokens,
       coalesce(sum(cost), 0) AS cost_pusd,
       coalesce(sum(CASE WHEN NOT delivered THEN cost END), 0) AS wasted_cost_pusd,
       coalesce(sum(unknown_cost), 0) AS unknown_cost_attempts,
       coalesce(sum(CASE WHEN NOT delivered THEN unknown_cost END), 0) AS wasted_unknown_cost_attempts,
       count_if(unknown_reason = 'no_usage') AS no_usage,
       count_if(unknown_reason = 'other_currency') AS other_currency,
       count_if(unknown_reason = 'no_price') AS no_price,
       count_if(unknown_reason = 'no_tier_price') AS no_tier_price,
       count_if(unknown_reason = 'no_kind_price') AS no_kind_price,
       coalesce(sum(region_unpriced), 0) AS region_unpriced_attempts,
       coalesce(sum(cache_write_1h_input_tokens), 0) AS cache_write_1h_input_tokens,
       coalesce(sum(CASE WHEN NOT delivered THEN cache_write_1h_input_tokens END), 0)
           AS wasted_cache_write_1h_input_tokens,
       coalesce(sum(web_search_requests), 0) AS web_search_requests,
       coalesce(sum(CASE WHEN NOT delivered THEN web_search_requests END), 0) AS wasted_web_search_requests
FROM scope_attempts;

-- result: served
WITH served AS (
    SELECT served_provider, served_model,
           count(*) AS attempts,
           count_if(NOT delivered) AS wasted_attempts,
           count_if(served_provider <> provider) AS rerouted_attempts,
           coalesce(sum(input_tokens), 0) AS input_tokens,
           coalesce(sum(output_tokens), 0) AS output_tokens,
           coalesce(sum(cached_input_tokens), 0) AS cached_input_tokens,
           coalesce(sum(cost), 0) AS cost_pusd,
           coalesce(sum(CASE WHEN NOT delivered THEN cost END), 0) AS wasted_cost_pusd,
           coalesce(sum(unknown_cost), 0) AS unknown_cost_attempts,
           min(prices_as_of) AS prices_as_of
    FROM scope_attempts
    GROUP BY served_provider, served_model
),
providers_ranked AS (
    SELECT served_provider,
           row_number() OVER (ORDER BY sum(cost_pusd) DESC, sum(attempts) DESC, served_provider) AS provider_rank
    FROM served GROUP BY served_provider
),
ranked AS (
    SELECT s.*, p.provider_rank,
           row_number() OVER (PARTITION BY p.provider_rank <= 50
                              ORDER BY s.cost_pusd DESC, s.attempts DESC, s.served_provider, s.served_model)
               AS model_rank
    FROM served s JOIN providers_ranked p ON p.served_provider = s.served_provider
),
folded AS (
    SELECT CASE WHEN provider_rank <= 50 THEN served_provider ELSE 'other' END AS served_provider,
           CASE WHEN provider_rank <= 50 AND model_rank <= 200 THEN served_model ELSE 'other' END AS served_model,
           attempts, wasted_attempts, rerouted_attempts, input_tokens, output_tokens, cached_input_tokens,
           cost_pusd, wasted_cost_pusd, unknown_cost_attempts, prices_as_of
    FROM ranked
)
SELECT * FROM (
    SELECT served_provider, CAST(NULL AS STRING) AS served_model,
           sum(attempts) AS attempts, sum(wasted_attempts) AS wasted_attempts,
           sum(rerouted_attempts) AS rerouted_attempts, sum(input_tokens) AS input_tokens,
           sum(output_tokens) AS output_tokens, sum(cached_input_tokens) AS cached_input_tokens,
           sum(cost_pusd) AS cost_pusd, sum(wasted_cost_pusd) AS wasted_cost_pusd,
           sum(unknown_cost_attempts) AS unknown_cost_attempts,
           CAST(min(prices_as_of) AS STRING) AS prices_as_of
    FROM folded GROUP BY served_provider
    UNION ALL
    SELECT served_provider, served_model,
           sum(attempts), sum(wasted_attempts), sum(rerouted_attempts), sum(input_tokens), sum(output_tokens),
           sum(cached_input_tokens), sum(cost_pusd), sum(wasted_cost_pusd), sum(unknown_cost_attempts),
           CAST(min(prices_as_of) AS STRING)
    FROM folded GROUP BY served_provider, served_model
)
ORDER BY served_provider ASC, served_model ASC NULLS FIRST;

-- result: routes
SELECT primary_route_group,
       CASE WHEN primary_route_group IS NULL THEN primary_provider END AS primary_provider,
       CASE WHEN primary_route_group IS NULL THEN primary_model END AS primary_model,
       count(*) AS workflows,
       count_if(outcome NOT IN ('queued', 'in_flight')) AS terminal,
       count_if(outcome = 'primary_success') AS primary_success,
       count_if(outcome = 'retry_recovery') AS retry_recovery,
       count_if(outcome = 'fallback_recovery') AS fallback_recovery,
       count_if(outcome = 'degraded') AS degraded,
       count_if(outcome = 'fail_closed') AS fail_closed
FROM scope_workflows
GROUP BY 1, 2, 3
ORDER BY workflows DESC, primary_route_group ASC NULLS FIRST, primary_provider ASC NULLS LAST,
         primary_model ASC NULLS LAST;

-- result: fallbacks
SELECT primary_route_group,
       CASE WHEN primary_route_group IS NULL THEN primary_provider END AS primary_provider,
       CASE WHEN primary_route_group IS NULL THEN primary_model END AS primary_model,
       fallback_route_group,
       CASE WHEN fallback_route_group IS NULL THEN fallback_provider END AS fallback_provider,
       CASE WHEN fallback_route_group IS NULL THEN fallback_model END AS fallback_model,
       fallback_reason AS reason,
       count(*) AS workflows,
       count_if(outcome = 'fallback_recovery') AS recovered
FROM scope_workflows
WHERE fallback_reason IS NOT NULL
GROUP BY 1, 2, 3, 4, 5, 6, 7
ORDER BY workflows DESC, primary_route_group ASC NULLS FIRST, primary_provider ASC NULLS LAST,
         primary_model ASC NULLS LAST, fallback_route_group ASC NULLS FIRST, fallback_provider ASC NULLS LAST,
         fallback_model ASC NULLS LAST, reason ASC NULLS LAST;

-- result: amplification
-- Nearest-rank percentiles of attempts per workflow (amplification.sql).
WITH long AS (
    SELECT 0 AS position, 'all' AS layer, attempts AS n FROM scope_workflows
    UNION ALL SELECT 1, 'sdk', n_sdk FROM scope_workflows
    UNION ALL SELECT 2, 'gateway', n_gateway FROM scope_workflows
    UNION ALL SELECT 3, 'app', n_app FROM scope_workflows
    UNION ALL SELECT 4, 'queue', n_queue FROM scope_workflows
),
histogram AS (
    SELECT position, layer, n, count(*) AS workflows_with_n FROM long GROUP BY position, layer, n
),
cumulative AS (
    SELECT position, layer, n,
           sum(workflows_with_n) OVER (PARTITION BY layer ORDER BY n) AS at_most_n,
           sum(workflows_with_n) OVER (PARTITION BY layer) AS workflows,
           sum(n * workflows_with_n) OVER (PARTITION BY layer) AS attempts
    FROM histogram
)
SELECT layer, first(attempts) AS attempts, first(workflows) AS workflows,
       min(n) FILTER (WHERE at_most_n >= ceil(0.50 * workflows)) AS p50,
       min(n) FILTER (WHERE at_most_n >= ceil(0.99 * workflows)) AS p99,
       max(n) AS max
FROM cumulative
GROUP BY position, layer
ORDER BY position;
