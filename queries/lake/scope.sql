-- lake/scope.sql: what `report --lake` reads of an attempt lake, in DuckDB's
-- dialect: the lake's dedup, then the workflows and attempts of the window
-- shaped as the node's own report queries read them (scope.sql's
-- temp.scope_workflows, and the rows cost.sql's costed_rows prices into
-- temp.scope_attempts), so outcomes.sql, waste.sql, cost_by_served.sql,
-- amplification.sql, routes.sql and fallbacks.sql answer the lake
-- unchanged. The rules are those of facts.sql and of the Spark and
-- ClickHouse reports (queries/rules/rules.sql), one row per workflow and
-- one per attempt, derived in one pass: nothing is stored. Rendered from
-- queries/rules/lake_scope.template.sql: edit that or the rules, then
-- render (docs/testing.md, "Rules").
-- Parameters: the views temp.lake_rows (the lake's rows inside the read
--   horizon, with the partition columns day and bucket of their paths, an
--   added column no file holds as a typed NULL), and the variables
--   lake_since, lake_until (TIMESTAMP or NULL: workflows whose first
--   attempt started in [since, until)) and lake_workflow (VARCHAR or NULL:
--   only workflows of this name).
-- Columns of temp.lake_attempts: the columns the report reads of the lake's
--   attempts, one row per attempt after the dedup.
-- Columns of temp.scope_workflows: workflow_id, workflow_name, the primary
--   and fallback routes, fallback_reason, outcome, n_all, n_sdk, n_gateway,
--   n_app, n_queue and workflows (1): one row per workflow in scope, as
--   rollups.sql shapes them.
-- Columns of temp.lake_attempt_groups: the attempts of those workflows
--   grouped as rollups.sql groups rollup_attempts (by workflow_name, layer,
--   requested and served provider and model, status, error_class,
--   delivered, cost_kind, price_key and priced_kinds), with their
--   attempts, token counts (0 when not stated) and emitter_cost_pusd.
-- Columns of temp.lake_counts: copies (the rows read: every stored copy of
--   an attempt) and attempts (those left after the dedup).

-- The rows read, with the columns the report reads.
CREATE OR REPLACE TEMP TABLE lake_read AS
SELECT attempt_id, workflow_id, started_at, attempt, layer, workflow, route, provider, model, route_group,
       decision, status, served_provider, served_model, error_class, input_tokens, output_tokens,
       cached_input_tokens, cache_write_input_tokens, reasoning_output_tokens, cost_pusd, cost_currency,
       batch, service_tier, billing_account, cache_write_1h_input_tokens, web_search_requests,
       ingested_at, ingest_node, ingest_seq, source_trace
FROM temp.lake_rows;

-- Dedup, as queries/lake/dedup.sql: of each trace on its node, the rows of
-- its older revisions; of each attempt stored more than once, every copy
-- but the first. Only the traces and attempts that have them are sorted:
-- most rows are one revision, stored once.
CREATE OR REPLACE TEMP TABLE lake_dropped AS
WITH revisions AS (
    SELECT source_trace, ingest_node, max(ingest_seq) AS newest_seq FROM temp.lake_read
    WHERE source_trace IS NOT NULL
    GROUP BY source_trace, ingest_node
),
superseded AS (
    SELECT r.rowid AS r FROM temp.lake_read r
    JOIN revisions v ON v.source_trace = r.source_trace AND v.ingest_node = r.ingest_node
    WHERE NOT (r.source_trace IS NULL OR r.ingest_seq = v.newest_seq)
),
copied AS (
    SELECT attempt_id FROM temp.lake_read
    WHERE rowid NOT IN (SELECT r FROM superseded)
    GROUP BY attempt_id
    HAVING count(*) > 1
)
SELECT r FROM superseded
UNION ALL
SELECT rowid FROM temp.lake_read
WHERE attempt_id IN (SELECT attempt_id FROM copied) AND rowid NOT IN (SELECT r FROM superseded)
QUALIFY row_number() OVER (PARTITION BY attempt_id ORDER BY ingested_at, ingest_node, ingest_seq) > 1;

-- facts.sql's order in a workflow (attempt NULLS LAST, started_at, status,
-- attempt_id), sorted over the few columns it reads and joined back, and
-- how many attempts each workflow has.
CREATE OR REPLACE TEMP TABLE lake_ordered AS
SELECT a.* EXCLUDE (ingested_at, ingest_node, ingest_seq, source_trace), s.seq, s.n_all,
       coalesce(a.status = 'ok' AND (a.decision IS NULL OR a.decision NOT IN ('retry', 'fallback')), false) AS deliverable
FROM temp.lake_read a
JOIN (
    SELECT rowid AS r,
           row_number() OVER (PARTITION BY workflow_id
                              ORDER BY attempt ASC NULLS LAST, started_at, status, attempt_id) AS seq,
           count(*) OVER (PARTITION BY workflow_id) AS n_all
    FROM temp.lake_read
    WHERE rowid NOT IN (SELECT r FROM temp.lake_dropped)
) s ON s.r = a.rowid;

-- What was read, counted before the rows read are let go (the window's
-- rows are all held once, not twice).
CREATE OR REPLACE TEMP TABLE lake_counts AS
SELECT (SELECT count(*) FROM temp.lake_read) AS copies, (SELECT count(*) FROM temp.lake_ordered) AS attempts;
DROP TABLE temp.lake_read;
DROP TABLE temp.lake_dropped;

CREATE OR REPLACE TEMP MACRO lake_in_scope(first_at, workflow_name) AS
    (getvariable('lake_since') IS NULL OR first_at >= getvariable('lake_since'))
    AND (getvariable('lake_until') IS NULL OR first_at < getvariable('lake_until'))
    AND (getvariable('lake_workflow') IS NULL OR workflow_name = getvariable('lake_workflow'));

-- The workflows in scope, as facts.sql derives them.
CREATE OR REPLACE TEMP TABLE lake_workflows AS
WITH per_workflow AS (
    SELECT workflow_id, n_all,
           count(*) FILTER (WHERE layer = 'sdk') AS n_sdk,
           count(*) FILTER (WHERE layer = 'gateway') AS n_gateway,
           count(*) FILTER (WHERE layer = 'app') AS n_app,
           count(*) FILTER (WHERE layer = 'queue') AS n_queue,
           max(started_at) FILTER (WHERE seq = 1) AS first_at,
           arg_min(workflow, seq) FILTER (WHERE workflow IS NOT NULL) AS workflow_name,
           coalesce(arg_min({'provider': provider, 'model': model, 'route_group': route_group}, seq)
                        FILTER (WHERE route = 'primary'),
                    max({'provider': provider, 'model': model, 'route_group': route_group}) FILTER (WHERE seq = 1))
               AS primary_route,
           arg_min({'seq': seq, 'provider': provider, 'model': model, 'route_group': route_group, 'route': route}, seq)
               FILTER (WHERE deliverable) AS delivered,
           arg_max({'decision': decision}, seq).decision AS last_decision
    FROM temp.lake_ordered
    WHERE n_all > 1
    GROUP BY workflow_id, n_all
    UNION ALL
    -- A workflow of one attempt: the same columns, of that attempt alone.
    SELECT workflow_id, n_all, (layer = 'sdk')::BIGINT AS n_sdk, (layer = 'gateway')::BIGINT AS n_gateway,
           (layer = 'app')::BIGINT AS n_app, (layer = 'queue')::BIGINT AS n_queue,
           started_at AS first_at, workflow AS workflow_name,
           {'provider': provider, 'model': model, 'route_group': route_group} AS primary_route,
           CASE WHEN deliverable THEN {'seq': seq, 'provider': provider, 'model': model, 'route_group': route_group,
                                       'route': route} END AS delivered,
           decision AS last_decision
    FROM temp.lake_ordered
    WHERE n_all = 1
)
SELECT workflow_id, workflow_name, first_at, n_all, n_sdk, n_gateway, n_app, n_queue,
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
FROM per_workflow
WHERE lake_in_scope(first_at, workflow_name);

-- Each attempt of those workflows as rollups.sql counts it: tokens not
-- stated count 0, the emitter's own cost apart; its route as facts.sql's,
-- its cost kind and price key by cost.sql's macros. A workflow of one attempt is its own: its
-- columns need no join. A view: the fallbacks read a few of its rows, the
-- groups read it once, and a table of every attempt would be held whole.
CREATE OR REPLACE TEMP VIEW lake_attempt_rows AS
WITH in_scope AS (
    SELECT o.*, w.workflow_name, w.primary_route_group, w.primary_provider, w.primary_model, w.delivered_seq
    FROM temp.lake_ordered o
    JOIN temp.lake_workflows w USING (workflow_id)
    WHERE o.n_all > 1
    UNION ALL
    SELECT o.*, o.workflow, o.route_group, o.provider, o.model, CASE WHEN o.deliverable THEN o.seq END
    FROM temp.lake_ordered o
    WHERE o.n_all = 1 AND lake_in_scope(o.started_at, o.workflow)
)
SELECT workflow_id, seq, workflow_name, layer, provider, model, route_group, served_provider, served_model,
       status, error_class,
       coalesce(route, CASE WHEN CASE WHEN route_group IS NOT NULL OR primary_route_group IS NOT NULL THEN coalesce(route_group = primary_route_group, false)
                                      ELSE provider = primary_provider AND model = primary_model END
                             THEN 'primary' ELSE 'fallback' END)
           AS effective_route,
       coalesce(seq = delivered_seq, false) AS delivered, 1::BIGINT AS attempts,
       cost_kind_of(cost_pusd, cost_currency, status, input_tokens, output_tokens,
                    cached_input_tokens, cache_write_input_tokens, web_search_requests) AS cost_kind,
       -- (cost_kind is the column above: DuckDB reads an alias of the same list.)
       priced_kinds_of(cost_kind, input_tokens, cached_input_tokens, cache_write_input_tokens,
                       cache_write_1h_input_tokens, output_tokens, reasoning_output_tokens,
                       web_search_requests) AS priced_kinds,
       price_key_of(started_at, batch, service_tier, input_tokens, billing_account) AS price_key,
       coalesce(input_tokens, 0) AS input_tokens, coalesce(output_tokens, 0) AS output_tokens,
       coalesce(cached_input_tokens, 0) AS cached_input_tokens,
       coalesce(cache_write_input_tokens, 0) AS cache_write_input_tokens,
       cost_pusd AS emitter_cost_pusd,
       coalesce(reasoning_output_tokens, 0) AS reasoning_output_tokens,
       coalesce(cache_write_1h_input_tokens, 0) AS cache_write_1h_input_tokens,
       coalesce(web_search_requests, 0) AS web_search_requests
FROM in_scope;

-- A fallback's route and reason: the first attempt off the primary route,
-- and the error class of the last failed attempt before it.
CREATE OR REPLACE TEMP TABLE scope_workflows AS
WITH first_fallback AS (
    SELECT workflow_id, min(seq) AS fallback_seq FROM temp.lake_attempt_rows
    WHERE effective_route = 'fallback' GROUP BY workflow_id
),
fallbacks AS (
    SELECT a.workflow_id,
           coalesce(arg_max(coalesce(a.error_class, 'unknown'), a.seq)
                        FILTER (WHERE a.status = 'error' AND a.seq < f.fallback_seq), 'none') AS reason,
           arg_min({'provider': a.provider, 'model': a.model, 'route_group': a.route_group}, a.seq)
               FILTER (WHERE a.seq = f.fallback_seq) AS route
    FROM temp.lake_attempt_rows a
    JOIN first_fallback f ON f.workflow_id = a.workflow_id
    WHERE a.seq <= f.fallback_seq
    GROUP BY a.workflow_id
)
SELECT w.workflow_id, w.workflow_name, w.primary_provider, w.primary_model, w.primary_route_group, w.outcome,
       f.route.provider AS fallback_provider, f.route.model AS fallback_model,
       f.route.route_group AS fallback_route_group, f.reason AS fallback_reason,
       w.n_all, w.n_sdk, w.n_gateway, w.n_app, w.n_queue, 1::BIGINT AS workflows
FROM temp.lake_workflows w
LEFT JOIN fallbacks f USING (workflow_id);

-- The attempts in scope grouped as rollups.sql groups them (by what
-- selects their price and the kinds they used, so a kind without a price
-- makes exactly the attempts that used it unknown): pricing and the
-- report's queries then read a few rows per route, not one per attempt.
CREATE OR REPLACE TEMP TABLE lake_attempt_groups AS
SELECT workflow_name, layer, provider, model, served_provider, served_model, status, error_class, delivered,
       cost_kind, price_key, priced_kinds,
       sum(attempts)::BIGINT AS attempts, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
       sum(cached_input_tokens) AS cached_input_tokens, sum(cache_write_input_tokens) AS cache_write_input_tokens,
       sum(emitter_cost_pusd) AS emitter_cost_pusd, sum(reasoning_output_tokens) AS reasoning_output_tokens,
       sum(cache_write_1h_input_tokens) AS cache_write_1h_input_tokens,
       sum(web_search_requests) AS web_search_requests
FROM temp.lake_attempt_rows
GROUP BY ALL;

DROP TABLE temp.lake_ordered;
DROP VIEW temp.lake_attempt_rows;
DROP MACRO lake_in_scope;
