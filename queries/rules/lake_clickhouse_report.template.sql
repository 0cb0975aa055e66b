-- clickhouse/report.sql: the report of an attempt lake in ClickHouse SQL
-- (a server over s3() or file(), or chdb in process): the lake's dedup
-- (queries/lake/dedup.sql), then the rules of queries/facts.sql and the
-- report queries, as spark/report.sql has them, in ClickHouse's dialect.
-- scripts/lake-report.py runs it statement by statement in one session
-- and shapes the results as `report --format json` does. Rendered from
-- queries/rules/lake_clickhouse_report.template.sql with the rules of
-- queries/rules/rules.sql: edit those, then render (docs/testing.md, "Rules").
-- ClickHouse differs where it matters here: NULLs need
-- join_use_nulls and Nullable columns (set below and where the files are
-- read), Int64 products wrap (money is Int128 pico-USD), argMin skips a
-- NULL argument (a tuple keeps it), and there is no FILTER (the -If
-- combinators) and no grouping() (totals are a UNION ALL).
-- Parameters (substituted as SQL literals; NULL when not given):
--   ${attempts_files}  the table function of the attempts files, e.g.
--                      file('LAKE/attempts/*/*/*.parquet', Parquet) or s3(...)
--   ${price_files}     the same for LAKE/prices/*.parquet
--   ${read_from}, ${read_until}  DateTime64(6, 'UTC'): the rows read (the
--                      horizon around the window; NULL: every row)
--   ${since}, ${until} DateTime64(6, 'UTC'): workflows whose first attempt started in [since, until)
--   ${workflow}        String: only workflows with this name
--   ${db}              a scratch database the statements create tables in
--   ${absent_columns}  `, CAST(NULL AS Nullable(T)) AS name` for each added
--                      column no file holds yet (a lake every file of which
--                      predates it); empty otherwise
-- Results, each after a `-- result: NAME` line: as spark/report.sql's.

SET join_use_nulls = 1;
-- An alias named like a column (sum(input_tokens) AS input_tokens) must not
-- shadow the column in the expressions beside it.
SET prefer_column_name_to_alias = 1;
SET session_timezone = 'UTC';
SET use_hive_partitioning = 1;
SET schema_inference_make_columns_nullable = 1;
SET input_format_null_as_default = 0;
-- Every file's columns, whichever is read first: a file written before an
-- added column reads it as NULL.
SET schema_inference_mode = 'union';

DROP DATABASE IF EXISTS ${db};
CREATE DATABASE ${db} ENGINE = Atomic;

CREATE VIEW ${db}.lake_read AS
SELECT *${absent_columns} FROM ${attempts_files}
WHERE (${read_from} IS NULL OR (toDate(day) >= toDate(${read_from}) AND started_at >= ${read_from}))
  AND (${read_until} IS NULL OR (toDate(day) <= toDate(${read_until}) AND started_at < ${read_until}));

-- Dedup, as queries/lake/dedup.sql: the newest revision of each trace on
-- its node, then the first stored copy of each attempt.
-- Only the columns the report reads are kept (the Memory engine holds
-- them uncompressed).
CREATE TABLE ${db}.lake_attempts ENGINE = Memory AS
SELECT attempt_id, workflow_id, started_at, attempt, layer, workflow, route, provider, model, route_group,
       decision, status, served_provider, served_model, error_class, input_tokens, output_tokens,
       cached_input_tokens, cache_write_input_tokens, reasoning_output_tokens, cost_pusd, cost_currency,
       batch, service_tier, billing_account, cache_write_1h_input_tokens, web_search_requests FROM (
    SELECT *, row_number() OVER (PARTITION BY attempt_id ORDER BY {{copy_order()}}) AS copy_rank
    FROM (
        SELECT attempt_id, workflow_id, started_at, attempt, layer, workflow, route, provider, model, route_group,
               decision, status, served_provider, served_model, error_class, input_tokens, output_tokens,
               cached_input_tokens, cache_write_input_tokens, reasoning_output_tokens, cost_pusd, cost_currency,
               batch, service_tier, billing_account, cache_write_1h_input_tokens, web_search_requests,
               ingested_at, ingest_node, ingest_seq, source_trace,
               max(ingest_seq) OVER (PARTITION BY source_trace, ingest_node) AS trace_revision
        FROM ${db}.lake_read
    )
    WHERE {{current_revision(source_trace, ingest_seq, trace_revision)}}
)
WHERE copy_rank = 1;

-- result: copies
SELECT (SELECT count() FROM ${db}.lake_read) AS copies_read, (SELECT count() FROM ${db}.lake_attempts) AS attempts;

-- The newest answer of the price table for each served model and price
-- key (every node ships the keys of its own attempts).
CREATE TABLE ${db}.lake_prices ENGINE = Memory AS
SELECT served_provider, served_model, day, tier, over, account, priced, unpriced, input_pusd, cached_input_pusd,
       cache_write_pusd, cache_write_1h_pusd, output_pusd, reasoning_output_pusd, web_search_pusd, region_dropped,
       as_of FROM (
    SELECT *, row_number() OVER (PARTITION BY served_provider, served_model, day, tier, over, account
                                 ORDER BY exported_at DESC, ingest_node) AS r
    FROM ${price_files}
)
WHERE r = 1;

-- facts.sql's order in a workflow: attempt NULLS LAST, started_at, status, attempt_id.
CREATE TABLE ${db}.fact_ordered ENGINE = Memory AS
SELECT workflow_id, attempt_id, started_at, layer, workflow, route, provider, model, route_group, decision, status,
       served_provider, served_model, error_class, input_tokens, output_tokens, cached_input_tokens,
       cache_write_input_tokens, reasoning_output_tokens, cost_pusd, cost_currency,
       batch, service_tier, billing_account, cache_write_1h_input_tokens, web_search_requests,
       row_number() OVER (PARTITION BY workflow_id
                          ORDER BY {{attempt_order(attempt, started_at, status, attempt_id)}}) AS seq,
       {{deliverable(status, decision)}} AS deliverable
FROM ${db}.lake_attempts;

CREATE TABLE ${db}.fact_workflows ENGINE = Memory AS
WITH per_workflow AS (
    SELECT workflow_id,
           count() AS attempts,
           countIf(layer = 'sdk') AS n_sdk,
           countIf(layer = 'gateway') AS n_gateway,
           countIf(layer = 'app') AS n_app,
           countIf(layer = 'queue') AS n_queue,
           minIf(started_at, seq = 1) AS first_at,
           argMinIf(workflow, seq, workflow IS NOT NULL) AS workflow_name,
           if(countIf(route = 'primary') > 0,
              argMinIf(tuple(provider, model, route_group), seq, route = 'primary'),
              argMin(tuple(provider, model, route_group), seq)) AS primary_route,
           countIf(deliverable) > 0 AS has_delivered,
           argMinIf(tuple(seq, provider, model, route_group, route), seq, deliverable) AS delivered,
           argMax(tuple(decision), seq).1 AS last_decision
    FROM ${db}.fact_ordered
    GROUP BY workflow_id
)
SELECT workflow_id, workflow_name, first_at, attempts, n_sdk, n_gateway, n_app, n_queue,
       if(has_delivered, delivered.1, NULL) AS delivered_seq,
       primary_route.1 AS primary_provider, primary_route.2 AS primary_model, primary_route.3 AS primary_route_group,
       -- delivered is a tuple (seq, provider, model, route_group, route).
       {{outcome(if(has_delivered, delivered.1, NULL), delivered.5, delivered.4, delivered.2, delivered.3,
                 primary_route.3, primary_route.1, primary_route.2, last_decision)}} AS outcome
FROM per_workflow;

-- Columns are named one by one: ClickHouse names a column that both sides
-- of a join have `o.column` in `o.*`.
CREATE TABLE ${db}.fact_attempts ENGINE = Memory AS
SELECT o.workflow_id AS workflow_id, o.attempt_id AS attempt_id, o.started_at AS started_at, o.layer AS layer,
       o.workflow AS workflow, o.route AS route, o.provider AS provider, o.model AS model,
       o.route_group AS route_group, o.decision AS decision, o.status AS status, o.served_provider AS served_provider,
       o.served_model AS served_model, o.error_class AS error_class, o.input_tokens AS input_tokens, o.output_tokens AS output_tokens,
       o.cached_input_tokens AS cached_input_tokens, o.cache_write_input_tokens AS cache_write_input_tokens,
       o.reasoning_output_tokens AS reasoning_output_tokens, o.cost_pusd AS cost_pusd, o.seq AS seq,
       o.deliverable AS deliverable, o.batch AS batch, o.service_tier AS service_tier,
       o.billing_account AS billing_account, o.cache_write_1h_input_tokens AS cache_write_1h_input_tokens,
       o.web_search_requests AS web_search_requests,
       {{effective_route(o.route, o.route_group, o.provider, o.model,
                         w.primary_route_group, w.primary_provider, w.primary_model)}} AS effective_route,
       coalesce(o.seq = w.delivered_seq, false) AS delivered,
       {{cost_kind(o.cost_pusd, o.cost_currency, o.status, o.input_tokens, o.output_tokens,
                   o.cached_input_tokens, o.cache_write_input_tokens, o.web_search_requests)}} AS cost_kind
FROM ${db}.fact_ordered o
JOIN ${db}.fact_workflows w ON w.workflow_id = o.workflow_id;

-- A fallback's route and reason: the first attempt off the primary route,
-- and the error class of the last failed attempt before it.
CREATE TABLE ${db}.fact_fallbacks ENGINE = Memory AS
WITH first_fallback AS (
    SELECT workflow_id, min(seq) AS fallback_seq FROM ${db}.fact_attempts
    WHERE effective_route = 'fallback' GROUP BY workflow_id
)
SELECT a.workflow_id AS workflow_id,
       if(countIf(a.status = 'error' AND a.seq < f.fallback_seq) > 0,
          argMaxIf(tuple(coalesce(a.error_class, 'unknown')), a.seq, a.status = 'error' AND a.seq < f.fallback_seq).1,
          'none') AS fallback_reason,
       argMinIf(tuple(a.provider, a.model, a.route_group), a.seq, a.seq = f.fallback_seq) AS route
FROM ${db}.fact_attempts a
JOIN first_fallback f ON f.workflow_id = a.workflow_id
WHERE a.seq <= f.fallback_seq
GROUP BY a.workflow_id;

-- The workflows the report covers: by their first attempt and their name.
CREATE TABLE ${db}.scope_workflows ENGINE = Memory AS
SELECT w.workflow_id AS workflow_id, w.workflow_name AS workflow_name, w.first_at AS first_at, w.attempts AS attempts,
       w.n_sdk AS n_sdk, w.n_gateway AS n_gateway, w.n_app AS n_app, w.n_queue AS n_queue,
       w.delivered_seq AS delivered_seq, w.primary_provider AS primary_provider, w.primary_model AS primary_model, w.primary_route_group AS primary_route_group,
       w.outcome AS outcome,
       f.fallback_reason AS fallback_reason,
       f.route.1 AS fallback_provider, f.route.2 AS fallback_model, f.route.3 AS fallback_route_group
FROM ${db}.fact_workflows w
LEFT JOIN ${db}.fact_fallbacks f ON f.workflow_id = w.workflow_id
WHERE (${since} IS NULL OR w.first_at >= ${since})
  AND (${until} IS NULL OR w.first_at < ${until})
  AND (${workflow} IS NULL OR w.workflow_name = ${workflow});

-- Their attempts, priced as queries/cost.sql prices (the emitter's cost,
-- else 0 for a failure without tokens or searches, else the tokens at the
-- price of the served model's key: its day, tier, prompt size and account;
-- unknown without usage, in another currency, or without a price), with
-- why a cost is unknown, whether its price was found only once the served
-- model's region was dropped, and the as-of day of the price that priced it.
CREATE TABLE ${db}.priced_attempts ENGINE = Memory AS
SELECT a.workflow_id AS workflow_id, a.attempt_id AS attempt_id, a.cost_kind AS cost_kind,
       coalesce(p.priced, false) AS has_price, p.unpriced AS unpriced, p.region_dropped AS region_dropped,
       p.as_of AS as_of,
       if(coalesce(p.priced, false),
          {{priced_pusd(toInt128(coalesce(a.input_tokens, 0) - coalesce(a.cached_input_tokens, 0)
                                 - coalesce(a.cache_write_input_tokens, 0)),
                        toInt128(coalesce(a.cached_input_tokens, 0)),
                        toInt128(coalesce(a.cache_write_input_tokens, 0) - coalesce(a.cache_write_1h_input_tokens, 0)),
                        toInt128(coalesce(a.cache_write_1h_input_tokens, 0)),
                        toInt128(coalesce(a.output_tokens, 0) - coalesce(a.reasoning_output_tokens, 0)),
                        toInt128(coalesce(a.reasoning_output_tokens, 0)),
                        toInt128(coalesce(a.web_search_requests, 0)),
                        p.input_pusd, p.cached_input_pusd, p.cache_write_pusd, p.cache_write_1h_pusd,
                        p.output_pusd, p.reasoning_output_pusd, p.web_search_pusd)}}, NULL) AS priced
FROM ${db}.fact_attempts a
LEFT JOIN ${db}.lake_prices p
  ON p.served_provider = a.served_provider AND p.served_model = a.served_model
 AND p.day = toDate(a.started_at) AND p.tier = {{price_tier(a.batch, a.service_tier)}}
 AND p.over = {{prompt_over(a.input_tokens)}} AND isNotDistinctFrom(p.account, a.billing_account)
SETTINGS join_use_nulls = 1;

CREATE TABLE ${db}.scope_attempts ENGINE = Memory AS
SELECT a.workflow_id AS workflow_id, a.attempt_id AS attempt_id, a.started_at AS started_at, a.layer AS layer,
       a.workflow AS workflow, a.route AS route, a.provider AS provider, a.model AS model,
       a.route_group AS route_group, a.decision AS decision, a.status AS status, a.served_provider AS served_provider,
       a.served_model AS served_model, a.error_class AS error_class, a.input_tokens AS input_tokens, a.output_tokens AS output_tokens,
       a.cached_input_tokens AS cached_input_tokens, a.cache_write_input_tokens AS cache_write_input_tokens,
       a.reasoning_output_tokens AS reasoning_output_tokens, a.cost_pusd AS cost_pusd, a.seq AS seq,
       a.deliverable AS deliverable, a.effective_route AS effective_route, a.delivered AS delivered, a.cost_kind AS cost_kind,
       a.cache_write_1h_input_tokens AS cache_write_1h_input_tokens, a.web_search_requests AS web_search_requests,
       w.workflow_name AS workflow_name,
       coalesce(CASE a.cost_kind
                    WHEN 'emitter' THEN toInt128(a.cost_pusd)
                    WHEN 'priced' THEN q.priced
                    ELSE toInt128(0) END,
                toInt128(0)) AS cost,
       {{unknown_cost_reason(a.cost_kind, q.has_price, q.unpriced, q.priced)}} AS unknown_reason,
       if(unknown_reason IS NOT NULL, 1, 0) AS unknown_cost,
       if(unknown_reason IS NULL AND a.cost_kind = 'priced' AND coalesce(q.region_dropped, false), 1, 0)
           AS region_unpriced,
       if(unknown_reason IS NULL AND a.cost_kind = 'priced', q.as_of, NULL) AS prices_as_of
FROM ${db}.fact_attempts a
JOIN ${db}.scope_workflows w ON w.workflow_id = a.workflow_id
JOIN ${db}.priced_attempts q ON q.workflow_id = a.workflow_id AND q.attempt_id = a.attempt_id;

-- result: outside
SELECT uniqExact(attempt_id) AS attempts_outside_horizon FROM ${attempts_files}
WHERE NOT ((${read_from} IS NULL OR (toDate(day) >= toDate(${read_from}) AND started_at >= ${read_from}))
           AND (${read_until} IS NULL OR (toDate(day) <= toDate(${read_until}) AND started_at < ${read_until})))
  AND workflow_id IN (SELECT workflow_id FROM ${db}.scope_workflows);

-- result: outcomes
WITH counts AS (
    SELECT workflow_name,
           count() AS workflows,
           countIf(outcome = 'primary_success') AS primary_success,
           countIf(outcome = 'retry_recovery') AS retry_recovery,
           countIf(outcome = 'fallback_recovery') AS fallback_recovery,
           countIf(outcome = 'degraded') AS degraded,
           countIf(outcome = 'fail_closed') AS fail_closed,
           countIf(outcome = 'queued') AS queued,
           countIf(outcome = 'in_flight') AS in_flight
    FROM ${db}.scope_workflows
    GROUP BY workflow_name
),
spend AS (
    SELECT workflow_name,
           count() AS attempts,
           countIf(NOT delivered) AS wasted_attempts,
           sum(cost) AS cost_pusd,
           sumIf(cost, NOT delivered) AS wasted_cost_pusd
    FROM ${db}.scope_attempts
    GROUP BY workflow_name
),
named AS (
    SELECT false AS is_total, c.workflow_name AS workflow_name, c.workflows AS workflows,
           c.primary_success AS primary_success, c.retry_recovery AS retry_recovery,
           c.fallback_recovery AS fallback_recovery, c.degraded AS degraded, c.fail_closed AS fail_closed,
           c.queued AS queued, c.in_flight AS in_flight, s.attempts AS attempts,
           s.wasted_attempts AS wasted_attempts, s.cost_pusd AS cost_pusd, s.wasted_cost_pusd AS wasted_cost_pusd
    FROM counts c
    LEFT JOIN spend s ON isNotDistinctFrom(s.workflow_name, c.workflow_name)
)
SELECT * FROM (
    SELECT true AS is_total, CAST(NULL AS Nullable(String)) AS workflow_name,
           sum(workflows) AS workflows, sum(primary_success) AS primary_success,
           sum(retry_recovery) AS retry_recovery, sum(fallback_recovery) AS fallback_recovery,
           sum(degraded) AS degraded, sum(fail_closed) AS fail_closed, sum(queued) AS queued,
           sum(in_flight) AS in_flight, sum(attempts) AS attempts, sum(wasted_attempts) AS wasted_attempts,
           sum(cost_pusd) AS cost_pusd, sum(wasted_cost_pusd) AS wasted_cost_pusd
    FROM named
    UNION ALL
    SELECT * FROM named
)
ORDER BY is_total DESC, workflow_name ASC NULLS LAST;

-- result: waste
SELECT count() AS attempts,
       countIf(NOT delivered) AS wasted_attempts,
       sum(toInt128(coalesce(input_tokens, 0))) AS input_tokens,
       sum(toInt128(coalesce(output_tokens, 0))) AS output_tokens,
       sum(toInt128(coalesce(cached_input_tokens, 0))) AS cached_input_tokens,
       sum(toInt128(coalesce(cache_write_input_tokens, 0))) AS cache_write_input_tokens,
       sumIf(toInt128(coalesce(input_tokens, 0)), NOT delivered) AS wasted_input_tokens,
       sumIf(toInt128(coalesce(output_tokens, 0)), NOT delivered) AS wasted_output_tokens,
       sumIf(toInt128(coalesce(cached_input_tokens, 0)), NOT delivered) AS wasted_cached_input_tokens,
       sumIf(toInt128(coalesce(cache_write_input_tokens, 0)), NOT delivered) AS wasted_cache_write_input_tokens,
       sum(toInt128(coalesce(reasoning_output_tokens, 0))) AS reasoning_output_tokens,
       sumIf(toInt128(coalesce(reasoning_output_tokens, 0)), NOT delivered) AS wasted_reasoning_output_tokens,
       sum(cost) AS cost_pusd,
       sumIf(cost, NOT delivered) AS wasted_cost_pusd,
       sum(unknown_cost) AS unknown_cost_attempts,
       sumIf(unknown_cost, NOT delivered) AS wasted_unknown_cost_attempts,
       countIf(unknown_reason = 'no_usage') AS no_usage,
       countIf(unknown_reason = 'other_currency') AS other_currency,
       countIf(unknown_reason = 'no_price') AS no_price,
       countIf(unknown_reason = 'no_tier_price') AS no_tier_price,
       countIf(unknown_reason = 'no_kind_price') AS no_kind_price,
       sum(region_unpriced) AS region_unpriced_attempts,
       sum(toInt128(coalesce(cache_write_1h_input_tokens, 0))) AS cache_write_1h_input_tokens,
       sumIf(toInt128(coalesce(cache_write_1h_input_tokens, 0)), NOT delivered) AS wasted_cache_write_1h_input_tokens,
       sum(toInt128(coalesce(web_search_requests, 0))) AS web_search_requests,
       sumIf(toInt128(coalesce(web_search_requests, 0)), NOT delivered) AS wasted_web_search_requests
FROM ${db}.scope_attempts;

-- result: served
WITH served AS (
    SELECT served_provider, served_model,
           count() AS attempts,
           countIf(NOT delivered) AS wasted_attempts,
           countIf(served_provider <> provider) AS rerouted_attempts,
           sum(toInt128(coalesce(input_tokens, 0))) AS input_tokens,
           sum(toInt128(coalesce(output_tokens, 0))) AS output_tokens,
           sum(toInt128(coalesce(cached_input_tokens, 0))) AS cached_input_tokens,
           sum(cost) AS cost_pusd,
           sumIf(cost, NOT delivered) AS wasted_cost_pusd,
           sum(unknown_cost) AS unknown_cost_attempts,
           min(prices_as_of) AS prices_as_of
    FROM ${db}.scope_attempts
    GROUP BY served_provider, served_model
),
providers_ranked AS (
    SELECT served_provider,
           row_number() OVER (ORDER BY sum(cost_pusd) DESC, sum(attempts) DESC, served_provider) AS provider_rank
    FROM served GROUP BY served_provider
),
joined AS (
    SELECT s.*, p.provider_rank AS provider_rank
    FROM served s JOIN providers_ranked p ON p.served_provider = s.served_provider
),
ranked AS (
    SELECT *,
           row_number() OVER (PARTITION BY provider_rank <= 50
                              ORDER BY cost_pusd DESC, attempts DESC, served_provider, served_model) AS model_rank
    FROM joined
),
folded AS (
    SELECT if(provider_rank <= 50, served_provider, 'other') AS served_provider,
           if(provider_rank <= 50 AND model_rank <= 200, served_model, 'other') AS served_model,
           attempts, wasted_attempts, rerouted_attempts, input_tokens, output_tokens, cached_input_tokens,
           cost_pusd, wasted_cost_pusd, unknown_cost_attempts, prices_as_of
    FROM ranked
)
SELECT * FROM (
    SELECT served_provider, CAST(NULL AS Nullable(String)) AS served_model,
           sum(attempts) AS attempts, sum(wasted_attempts) AS wasted_attempts,
           sum(rerouted_attempts) AS rerouted_attempts, sum(input_tokens) AS input_tokens,
           sum(output_tokens) AS output_tokens, sum(cached_input_tokens) AS cached_input_tokens,
           sum(cost_pusd) AS cost_pusd, sum(wasted_cost_pusd) AS wasted_cost_pusd,
           sum(unknown_cost_attempts) AS unknown_cost_attempts,
           CAST(min(prices_as_of) AS Nullable(String)) AS prices_as_of
    FROM folded GROUP BY served_provider
    UNION ALL
    SELECT served_provider, CAST(served_model AS Nullable(String)) AS served_model,
           sum(attempts), sum(wasted_attempts), sum(rerouted_attempts), sum(input_tokens), sum(output_tokens),
           sum(cached_input_tokens), sum(cost_pusd), sum(wasted_cost_pusd), sum(unknown_cost_attempts),
           CAST(min(prices_as_of) AS Nullable(String))
    FROM folded GROUP BY served_provider, served_model
)
ORDER BY served_provider ASC, served_model ASC NULLS FIRST;

-- result: routes
SELECT primary_route_group,
       if(primary_route_group IS NULL, primary_provider, NULL) AS route_provider,
       if(primary_route_group IS NULL, primary_model, NULL) AS route_model,
       count() AS workflows,
       countIf(outcome NOT IN ('queued', 'in_flight')) AS terminal,
       countIf(outcome = 'primary_success') AS primary_success,
       countIf(outcome = 'retry_recovery') AS retry_recovery,
       countIf(outcome = 'fallback_recovery') AS fallback_recovery,
       countIf(outcome = 'degraded') AS degraded,
       countIf(outcome = 'fail_closed') AS fail_closed
FROM ${db}.scope_workflows
GROUP BY primary_route_group, route_provider, route_model
ORDER BY workflows DESC, primary_route_group ASC NULLS FIRST, route_provider ASC NULLS LAST,
         route_model ASC NULLS LAST;

-- result: fallbacks
SELECT primary_route_group,
       if(primary_route_group IS NULL, primary_provider, NULL) AS route_provider,
       if(primary_route_group IS NULL, primary_model, NULL) AS route_model,
       fallback_route_group,
       if(fallback_route_group IS NULL, fallback_provider, NULL) AS to_provider,
       if(fallback_route_group IS NULL, fallback_model, NULL) AS to_model,
       fallback_reason AS reason,
       count() AS workflows,
       countIf(outcome = 'fallback_recovery') AS recovered
FROM ${db}.scope_workflows
WHERE fallback_reason IS NOT NULL
GROUP BY primary_route_group, route_provider, route_model, fallback_route_group, to_provider, to_model, reason
ORDER BY workflows DESC, primary_route_group ASC NULLS FIRST, route_provider ASC NULLS LAST,
         route_model ASC NULLS LAST, fallback_route_group ASC NULLS FIRST, to_provider ASC NULLS LAST,
         to_model ASC NULLS LAST, reason ASC NULLS LAST;

-- result: amplification
-- Nearest-rank percentiles of attempts per workflow (amplification.sql).
WITH long AS (
    SELECT 0 AS position, 'all' AS layer, attempts AS n FROM ${db}.scope_workflows
    UNION ALL SELECT 1, 'sdk', n_sdk FROM ${db}.scope_workflows
    UNION ALL SELECT 2, 'gateway', n_gateway FROM ${db}.scope_workflows
    UNION ALL SELECT 3, 'app', n_app FROM ${db}.scope_workflows
    UNION ALL SELECT 4, 'queue', n_queue FROM ${db}.scope_workflows
),
histogram AS (
    SELECT position, layer, n, count() AS workflows_with_n FROM long GROUP BY position, layer, n
),
cumulative AS (
    SELECT position, layer, n,
           sum(workflows_with_n) OVER (PARTITION BY layer ORDER BY n) AS at_most_n,
           sum(workflows_with_n) OVER (PARTITION BY layer) AS workflows,
           sum(n * workflows_with_n) OVER (PARTITION BY layer) AS attempts
    FROM histogram
)
SELECT layer, any(attempts) AS attempts, any(workflows) AS workflows,
       minIf(n, at_most_n >= ceil(0.50 * workflows)) AS p50,
       minIf(n, at_most_n >= ceil(0.99 * workflows)) AS p99,
       max(n) AS max
FROM cumulative
GROUP BY position, layer
ORDER BY position;
