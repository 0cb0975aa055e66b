-- scope.sql: the derivation every report reads (docs/record-format.md, "Outcomes" and "Waste, cost, amplification").
-- Not a report itself: it builds three temp tables, temp.scope_workflows (one
-- row per workflow in scope), temp.scope (one row per attempt of those
-- workflows) and temp.scope_fallbacks (one row per workflow that fell back).
--
-- Parameters: one row in temp.scope_filter (a script of several statements
-- cannot bind `$n` parameters to each of them):
--   since    TIMESTAMP or NULL: first attempt started at or after
--   until    TIMESTAMP or NULL: first attempt started before
--   workflow VARCHAR or NULL: the workflow's name (`workflow` field)
--   A workflow is selected as a whole, by its first attempt and its name, so a
--   window never cuts a workflow in two and changes its outcome. Only
--   workflows with an attempt inside [since, until) are sorted at all: the
--   first attempt is one of them, so the result is the same, and a short
--   alert window costs a scan, not a sort of every stored attempt.
-- Reads: attempts; temp.prices (served_provider, served_model, input_pusd,
--   cached_input_pusd, cache_write_pusd, output_pusd: pico-USD per token).
-- Routes compare by their key: the route group when the attempt has one
-- (a gateway's logical model over several deployments), else provider and
-- model. An explicit `route` field still wins over any comparison.
-- Columns of temp.scope_workflows:
--   workflow_id, workflow_name (first non-NULL `workflow` in order),
--   attempts, n_sdk, n_gateway, n_app, n_queue (attempts by layer),
--   wf_first_at, delivered_at (start of the first and of the delivered attempt),
--   delivered_seq, primary_provider, primary_model, primary_route_group,
--   outcome ("Outcomes": primary_success | retry_recovery | fallback_recovery |
--            degraded | queued | in_flight | fail_closed)
-- Columns of temp.scope: the stored attempt columns, plus
--   seq               1-based order in the workflow: attempt NULLS LAST, started_at, attempt_id
--   effective_route   route as stated, else primary iff same_route() as the primary route
--   delivered         this is the workflow's delivered attempt
--   outcome, workflow_name, wf_first_at, delivered_at  (the workflow's)
--   cost_pusd_eff     emitter's cost; else 0 for a failure without tokens; else NULL
--                     (unknown) for an answer without any usage; else priced from
--                     temp.prices; else NULL (unknown: no price)
-- Columns of temp.scope_fallbacks (a fallback activation: the workflow sent at
-- least one attempt to a route other than its primary):
--   workflow_id, workflow_name, primary_provider, primary_model, primary_route_group, outcome,
--   fallback_provider, fallback_model, fallback_route_group   the route of the first such attempt
--   reason            error class of the last failed attempt before it
--                     ('unknown' when unclassified, 'none' when nothing failed first)
-- Only the columns the rules read are sorted; the full row joins back by
-- rowid at the end (sorting wide rows costs more than the join).
-- Two routes are the same when both have a route group and it is the same,
-- or neither has one and provider and model are the same. (Compared field
-- by field: building a key string per attempt cost a third of the report.)
CREATE OR REPLACE TEMP MACRO same_route(group_a, provider_a, model_a, group_b, provider_b, model_b) AS
    CASE WHEN group_a IS NOT NULL OR group_b IS NOT NULL THEN coalesce(group_a = group_b, false)
         ELSE provider_a = provider_b AND model_a = model_b END;

CREATE OR REPLACE TEMP TABLE scope_ordered AS
SELECT a.rowid AS attempt_rowid, a.workflow_id, a.started_at, a.layer, a.workflow, a.route, a.provider,
       a.model, a.route_group, a.decision,
       -- Ties at equal order and start (second-resolution gateway logs):
       -- a failure sorts before a success ('error' < 'ok'), then the id.
       row_number() OVER (PARTITION BY a.workflow_id
                          ORDER BY a.attempt ASC NULLS LAST, a.started_at, a.status, a.attempt_id) AS seq,
       a.status = 'ok' AND (a.decision IS NULL OR a.decision NOT IN ('retry', 'fallback')) AS deliverable
FROM attempts a, temp.scope_filter f
WHERE (f.since IS NULL AND f.until IS NULL)
   OR a.workflow_id IN (SELECT workflow_id
                      FROM attempts, temp.scope_filter g
                      WHERE (g.since IS NULL OR started_at >= g.since)
                        AND (g.until IS NULL OR started_at <  g.until));

CREATE OR REPLACE TEMP TABLE scope_workflows AS
WITH facts AS (
    SELECT workflow_id,
           count(*) AS attempts,
           count(*) FILTER (WHERE layer = 'sdk')     AS n_sdk,
           count(*) FILTER (WHERE layer = 'gateway') AS n_gateway,
           count(*) FILTER (WHERE layer = 'app')     AS n_app,
           count(*) FILTER (WHERE layer = 'queue')   AS n_queue,
           max(started_at) FILTER (WHERE seq = 1) AS wf_first_at,
           arg_min(workflow, seq) FILTER (WHERE workflow IS NOT NULL) AS workflow_name,
           -- The primary route: the first attempt that says so, else the first attempt.
           coalesce(arg_min({'provider': provider, 'model': model, 'route_group': route_group}, seq)
                        FILTER (WHERE route = 'primary'),
                    max({'provider': provider, 'model': model, 'route_group': route_group})
                        FILTER (WHERE seq = 1)) AS primary_route,
           -- The delivered attempt: the first deliverable one. A struct is
           -- never NULL, so a NULL route inside it is kept, not skipped.
           arg_min({'seq': seq, 'started_at': started_at, 'provider': provider, 'model': model,
                    'route_group': route_group, 'route': route}, seq)
               FILTER (WHERE deliverable) AS delivered,
           arg_max({'decision': decision}, seq).decision AS last_decision
    FROM temp.scope_ordered
    GROUP BY workflow_id
)
SELECT workflow_id, workflow_name, attempts, n_sdk, n_gateway, n_app, n_queue,
       wf_first_at, delivered.started_at AS delivered_at, delivered.seq AS delivered_seq,
       primary_route.provider AS primary_provider, primary_route.model AS primary_model,
       primary_route.route_group AS primary_route_group,
       CASE WHEN delivered.seq = 1 THEN 'primary_success'
            WHEN delivered IS NOT NULL THEN
                 CASE coalesce(delivered.route,
                               CASE WHEN same_route(delivered.route_group, delivered.provider, delivered.model,
                                                    primary_route.route_group, primary_route.provider,
                                                    primary_route.model)
                                    THEN 'primary' ELSE 'fallback' END)
                      WHEN 'primary' THEN 'retry_recovery' ELSE 'fallback_recovery' END
            WHEN last_decision = 'degrade' THEN 'degraded'
            WHEN last_decision = 'queue'   THEN 'queued'
            WHEN last_decision IN ('retry', 'fallback') THEN 'in_flight'
            ELSE 'fail_closed' END AS outcome
FROM facts, temp.scope_filter f
WHERE (f.since IS NULL OR wf_first_at >= f.since)
  AND (f.until IS NULL OR wf_first_at <  f.until)
  AND (f.workflow IS NULL OR workflow_name = f.workflow);

CREATE OR REPLACE TEMP TABLE scope AS
SELECT a.*, o.seq,
       coalesce(a.route, CASE WHEN same_route(a.route_group, a.provider, a.model,
                                              w.primary_route_group, w.primary_provider, w.primary_model)
                              THEN 'primary' ELSE 'fallback' END) AS effective_route,
       coalesce(o.seq = w.delivered_seq, false) AS delivered,
       w.outcome, w.workflow_name, w.wf_first_at, w.delivered_at,
       CASE WHEN a.cost_pusd IS NOT NULL THEN a.cost_pusd::HUGEINT
            -- A failure that billed no tokens cost nothing, priced or not.
            WHEN a.status = 'error' AND coalesce(a.input_tokens, 0) = 0 AND coalesce(a.output_tokens, 0) = 0
                 AND coalesce(a.cached_input_tokens, 0) = 0 AND coalesce(a.cache_write_input_tokens, 0) = 0
                 THEN 0::HUGEINT
            -- An answer that reported no usage at all (a stream read without
            -- it) cost something nobody knows: unknown, not 0.
            WHEN a.status = 'ok' AND a.input_tokens IS NULL AND a.output_tokens IS NULL
                 AND a.cached_input_tokens IS NULL AND a.cache_write_input_tokens IS NULL
                 THEN NULL
            WHEN p.served_model IS NOT NULL THEN
                 (coalesce(a.input_tokens, 0) - coalesce(a.cached_input_tokens, 0)
                  - coalesce(a.cache_write_input_tokens, 0))::HUGEINT * p.input_pusd
               + coalesce(a.cached_input_tokens, 0)::HUGEINT * p.cached_input_pusd
               + coalesce(a.cache_write_input_tokens, 0)::HUGEINT * p.cache_write_pusd
               + coalesce(a.output_tokens, 0)::HUGEINT * p.output_pusd
       END AS cost_pusd_eff
FROM temp.scope_ordered o
JOIN temp.scope_workflows w ON w.workflow_id = o.workflow_id
JOIN attempts a ON a.rowid = o.attempt_rowid
LEFT JOIN temp.prices p
       ON p.served_provider = a.served_provider AND p.served_model = a.served_model;

DROP TABLE temp.scope_ordered;

CREATE OR REPLACE TEMP TABLE scope_fallbacks AS
WITH first_fallback AS (
    SELECT workflow_id, min(seq) AS fallback_seq
    FROM temp.scope
    WHERE effective_route = 'fallback'
    GROUP BY workflow_id
),
before_fallback AS (
    SELECT s.workflow_id,
           arg_max(coalesce(s.error_class, 'unknown'), s.seq)
               FILTER (WHERE s.status = 'error' AND s.seq < f.fallback_seq) AS reason,
           max({'provider': s.provider, 'model': s.model, 'route_group': s.route_group})
               FILTER (WHERE s.seq = f.fallback_seq) AS route
    FROM temp.scope s
    JOIN first_fallback f ON f.workflow_id = s.workflow_id
    WHERE s.seq <= f.fallback_seq
    GROUP BY s.workflow_id
)
SELECT b.workflow_id, w.workflow_name, w.primary_provider, w.primary_model, w.primary_route_group, w.outcome,
       b.route.provider AS fallback_provider, b.route.model AS fallback_model,
       b.route.route_group AS fallback_route_group,
       coalesce(b.reason, 'none') AS reason
FROM before_fallback b
JOIN temp.scope_workflows w ON w.workflow_id = b.workflow_id;
