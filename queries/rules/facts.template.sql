-- facts.sql: the per-workflow facts (docs/record-format.md, "Outcomes" and
-- "Waste, cost, amplification"). The reports read what this derives.
-- Rendered from queries/rules/facts.template.sql with the rules of
-- queries/rules/rules.sql (the lake's Spark and ClickHouse reports apply the
-- same ones): edit those, then render (docs/testing.md, "Rules").
-- Not a report itself: it builds temp.new_facts, temp.new_spend,
-- temp.new_latency, temp.new_findings, temp.new_steps, temp.new_times and temp.new_headroom
-- (shaped like workflow_facts, workflow_spend, workflow_latency, workflow_findings, workflow_steps,
-- workflow_times and workflow_headroom) for the workflows in temp.fact_input, through the
-- scratch tables temp.fact_ordered and temp.fact_workflows and the view
-- temp.fact_attempts over them (left for the caller to read or drop: the
-- workflow page reads fact_attempts). Flat rows, not lists per workflow:
-- aggregating structs into lists cost three times the rest of the
-- derivation. What costs here is moving wide rows: fact_attempts is a view
-- (its join is cheaper than a third wide table), and every comparison with
-- the attempt before is computed in fact_ordered's one sort (500k attempts:
-- 2.3 s to 1.8 s). Later window functions run over the few columns they
-- read and join back (new_steps: 2.3 s to 1.5 s at 850k attempts), and a
-- workflow of one attempt, most of them, skips the grouping it does not
-- need (fact_workflows, new_spend, new_latency; the `attempt` rows of
-- new_findings are one an attempt already).
--
-- Parameters: temp.fact_input (the stored attempt columns plus dim1..dim3,
--   the dimension values of each attempt; every attempt of each workflow it
--   holds, so the derivation sees whole workflows) and the variable
--   latency_buckets (DOUBLE[]: histogram bounds, seconds, ascending); the
--   macro int64_of (bounds.sql), which every stored sum passes through.
-- Columns of temp.new_facts (see migrations/0004_facts.sql), one row per workflow:
--   workflow_id, workflow_name   first non-NULL `workflow` in attempt order
--   first_at                     start of the first attempt (seq 1)
--   earliest_at, last_at         earliest and latest start of any attempt (where to look)
--   attempts, n_sdk, n_gateway, n_app, n_queue   attempts, all and by layer
--   delivered_at, delivered_seq  the delivered attempt (the first deliverable one)
--   primary_provider, primary_model, primary_route_group
--                                the first attempt that says route = primary, else the first attempt
--   outcome                      primary_success | retry_recovery | fallback_recovery |
--                                degraded | queued | in_flight | fail_closed
--   outcome_ms                   time to outcome: first attempt's start to the end of the
--                                delivered attempt, or of the last-ending attempt
--   fallback_provider, fallback_model, fallback_route_group
--                                route of the first attempt off the primary route
--   dim1, dim2, dim3             first non-NULL value of each dimension in attempt order
--   fallback_reason              error class of the last failed attempt before it
--                                ('unknown' unclassified, 'none' when nothing failed first;
--                                NULL when the workflow never fell back)
--   shape_key                    with more than one attempt, its shape's key (as on its
--                                steps; migrations/0017_shapes.sql); NULL with one
-- Columns of temp.new_spend (migrations/0005_flat_facts_dimensions.sql): the workflow's
--   workflow_id, first_at, workflow_name, outcome, dim1..dim3 (the keys its
--   rollups need), then its attempts grouped by attempt_minute, layer,
--   requested and served route, status, error class, retry (seq > 1),
--   delivered, cost_kind and limit_kind (of an attempt of class rate_limit:
--   requests | tokens | input_tokens | output_tokens, the kind its response
--   or the one just before it on the same route said was at 0 remaining,
--   else unknown; NULL for any other attempt) and off_primary (sent to a
--   route other than the workflow's primary: its fallbacks), with attempts,
--   the four token sums and emitter_cost_pusd. cost_kind:
--     emitter  the emitter stated its cost (emitter_cost_pusd)
--     free     a failure that billed no tokens: costs 0, priced or not
--     unknown  an answer that reported no usage at all: cost unknown
--     priced   tokens priced when read, by served model (unknown without a price)
-- Columns of temp.new_latency: workflow_id, first_at, workflow_name, then
--   duration and time-to-first-token observations by provider, model,
--   status, metric (duration | ttft) and bucket (le; NULL above the last
--   bound), with their sum in whole microseconds (observations, sum_us).
-- Columns of temp.new_headroom (migrations/0022_headroom.sql): the
--   workflow's workflow_id, first_at, workflow_name, then per served
--   provider, model, billing account and kind what its attempts' responses
--   said remained (observations, last_at, last_remaining, last_limit,
--   min_ratio and min_at, below_10pct and first_below_10pct_at) and its
--   429s of that kind (rate_limited, first_429_at); rows only for attempts
--   that stated headroom or were rate-limited.
-- Columns of temp.new_findings (migrations/0007_findings.sql): the
--   workflow's workflow_id, first_at, workflow_name, then the attempts that
--   broke a recovery rule grouped by kind, class, layer, served route and
--   cost_kind, with attempts, the four token sums and emitter_cost_pusd.
--   The kinds (docs/record-format.md, "The audit"); an attempt's "previous"
--   is the one just before it in the workflow's order:
--     retry_after_error     the previous attempt failed and this one went to
--                           the same route; class: the failure's error class
--     fallback_after_error  the previous attempt failed and this one went to
--                           another route; class: the failure's error class
--     replay_after_commit   an earlier attempt had committed a side effect,
--                           may have (commit_state unknown), or had shown
--                           output; class: committed | unknown |
--                           visible_output, of the first such attempt
--     retry_after_ignored   the previous attempt to the same provider failed
--                           asking to wait retry_after_ms, and this one
--                           started more than 1 s before its start +
--                           duration + retry_after; class: its error class
--     timeout_output_retried a timeout that had produced output tokens,
--                           followed by another attempt (the output is paid
--                           for again); the row is the timed-out attempt
--     fallback_route        an attempt on a fallback route; class: its route
--                           key, the route group or provider/model, lowercase
--     queued                an attempt the caller queued (decision queue) or a
--                           queue redelivered (layer queue); class:
--                           queue_decision | queue_redelivery
--     stacked_retry         the retry_after_error attempts of a workflow in
--                           which more than one layer retried the same route;
--                           class: those layers, sorted, joined by '+'
--   The policy (which classes may be retried, fail closed, ...) is applied
--   when reading (queries/audit.sql), so a policy change needs no rebuild.
--   Kind `attempt` (every attempt of a workflow with more than one, which
--   the budgets read) is not stored here: those rows are new_steps', read
--   through the macro attempt_findings (queries/attempt_findings.sql).
--
-- The audit's comparisons of an attempt with the one before it read the
-- rule as a macro.
CREATE OR REPLACE TEMP MACRO same_route(group_a, provider_a, model_a, group_b, provider_b, model_b) AS
    {{same_route(group_a, provider_a, model_a, group_b, provider_b, model_b)}};

-- Durations past 30 days are refused when records are decoded; rows stored
-- before that bound are clamped to it here, so no cast below can overflow
-- (the derivation is total) and the clamp is counted (fact_ordered.clamped).
CREATE OR REPLACE TEMP MACRO clamp_ms(ms) AS CASE WHEN ms > 2592000000.0 THEN 2592000000.0::DOUBLE ELSE ms END;

CREATE OR REPLACE TEMP TABLE fact_ordered AS
SELECT workflow_id, attempt_id, started_at, layer, workflow, route, provider, model, route_group, decision, status,
       served_provider, served_model, error_class, input_tokens, output_tokens, cached_input_tokens,
       cache_write_input_tokens, reasoning_output_tokens, cost_pusd, cost_currency, clamp_ms(duration_ms) AS duration_ms, clamp_ms(ttft_ms) AS ttft_ms,
       clamp_ms(retry_after_ms) AS retry_after_ms, commit_state, visible_output, dim1, dim2, dim3,
       coalesce(greatest(duration_ms, ttft_ms, retry_after_ms) > 2592000000.0, false) AS clamped,
       row_number() OVER by_order AS seq,
       {{deliverable(status, decision)}} AS deliverable,
       -- What the audit compares each attempt with, in the same sort.
       lag(status) OVER by_order AS prev_status,
       lag(error_class) OVER by_order AS prev_error_class,
       lag(provider) OVER by_order AS prev_provider,
       lag(model) OVER by_order AS prev_model,
       lag(route_group) OVER by_order AS prev_route_group,
       lead(attempt_id) OVER by_order IS NOT NULL AS has_next,
       first_value(CASE WHEN commit_state IN ('committed', 'unknown') THEN commit_state
                        WHEN visible_output THEN 'visible_output' END IGNORE NULLS)
           OVER (by_order ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS committed_before,
       max(started_at) OVER (by_order ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS latest_before,
       billing_account, headroom, exhausted_kind,
       lag(exhausted_kind) OVER by_order AS prev_exhausted_kind,
       batch, service_tier, cache_write_1h_input_tokens, web_search_requests
FROM (
    SELECT *,
           -- The kind the response said was used up (0 remaining), in a fixed
           -- order when several were: which limit a 429 hit.
           CASE WHEN ratelimit_remaining_requests = 0 THEN 'requests'
                WHEN ratelimit_remaining_tokens = 0 THEN 'tokens'
                WHEN ratelimit_remaining_input_tokens = 0 THEN 'input_tokens'
                WHEN ratelimit_remaining_output_tokens = 0 THEN 'output_tokens' END AS exhausted_kind,
           -- The headroom stated, a row per kind (NULL when none was: most
           -- attempts, which then carry nothing more through the sort).
           CASE WHEN coalesce(ratelimit_remaining_requests, ratelimit_remaining_tokens,
                              ratelimit_remaining_input_tokens, ratelimit_remaining_output_tokens) IS NOT NULL
                THEN [{'kind': 'requests', 'remaining': ratelimit_remaining_requests, 'lim': ratelimit_limit_requests},
                      {'kind': 'tokens', 'remaining': ratelimit_remaining_tokens, 'lim': ratelimit_limit_tokens},
                      {'kind': 'input_tokens', 'remaining': ratelimit_remaining_input_tokens,
                       'lim': ratelimit_limit_input_tokens},
                      {'kind': 'output_tokens', 'remaining': ratelimit_remaining_output_tokens,
                       'lim': ratelimit_limit_output_tokens}] END AS headroom
    FROM temp.fact_input
)
WINDOW by_order AS (PARTITION BY workflow_id ORDER BY {{attempt_order(attempt, started_at, status, attempt_id)}});

CREATE OR REPLACE TEMP TABLE fact_workflows AS
WITH per_workflow AS (
    SELECT workflow_id,
           count(*) AS attempts,
           count(*) FILTER (WHERE layer = 'sdk')     AS n_sdk,
           count(*) FILTER (WHERE layer = 'gateway') AS n_gateway,
           count(*) FILTER (WHERE layer = 'app')     AS n_app,
           count(*) FILTER (WHERE layer = 'queue')   AS n_queue,
           max(started_at) FILTER (WHERE seq = 1) AS first_at,
           min(started_at) AS earliest_at,
           max(started_at) AS last_at,
           arg_min(workflow, seq) FILTER (WHERE workflow IS NOT NULL) AS workflow_name,
           coalesce(arg_min({'provider': provider, 'model': model, 'route_group': route_group}, seq)
                        FILTER (WHERE route = 'primary'),
                    max({'provider': provider, 'model': model, 'route_group': route_group})
                        FILTER (WHERE seq = 1)) AS primary_route,
           -- A struct is never NULL, so a NULL route inside it is kept.
           arg_min({'seq': seq, 'started_at': started_at, 'provider': provider, 'model': model,
                    'route_group': route_group, 'route': route, 'duration_ms': coalesce(duration_ms, 0)}, seq)
               FILTER (WHERE deliverable) AS delivered,
           arg_max({'decision': decision}, seq).decision AS last_decision,
           -- Time to outcome: to the end of the delivered attempt, or of
           -- the last-ending one (a duration not reported counts as 0).
           coalesce(max(epoch_us(started_at) + coalesce(duration_ms, 0) * 1000) FILTER (WHERE deliverable),
                    max(epoch_us(started_at) + coalesce(duration_ms, 0) * 1000)) AS outcome_end_us,
           arg_min(dim1, seq) FILTER (WHERE dim1 IS NOT NULL) AS dim1,
           arg_min(dim2, seq) FILTER (WHERE dim2 IS NOT NULL) AS dim2,
           arg_min(dim3, seq) FILTER (WHERE dim3 IS NOT NULL) AS dim3
    FROM temp.fact_ordered
    WHERE seq > 1 OR has_next
    GROUP BY workflow_id
    UNION ALL
    -- A workflow of one attempt: the same columns, of that attempt alone.
    SELECT workflow_id, 1::BIGINT AS attempts, (layer = 'sdk')::BIGINT AS n_sdk, (layer = 'gateway')::BIGINT AS n_gateway,
           (layer = 'app')::BIGINT AS n_app, (layer = 'queue')::BIGINT AS n_queue,
           started_at AS first_at, started_at AS earliest_at, started_at AS last_at, workflow AS workflow_name,
           {'provider': provider, 'model': model, 'route_group': route_group} AS primary_route,
           CASE WHEN deliverable THEN {'seq': seq, 'started_at': started_at, 'provider': provider, 'model': model,
                                       'route_group': route_group, 'route': route,
                                       'duration_ms': coalesce(duration_ms, 0)} END AS delivered,
           decision AS last_decision,
           epoch_us(started_at) + coalesce(duration_ms, 0) * 1000 AS outcome_end_us,
           dim1, dim2, dim3
    FROM temp.fact_ordered
    WHERE seq = 1 AND NOT has_next
)
SELECT workflow_id, workflow_name, first_at, earliest_at, last_at, attempts, n_sdk, n_gateway, n_app, n_queue,
       dim1, dim2, dim3, delivered.started_at AS delivered_at, delivered.seq AS delivered_seq,
       -- The first deliverable attempt ends the workflow; a later one does not count.
       (coalesce(epoch_us(delivered.started_at) + delivered.duration_ms * 1000, outcome_end_us)
        - epoch_us(first_at)) / 1000.0 AS outcome_ms,
       primary_route.provider AS primary_provider, primary_route.model AS primary_model,
       primary_route.route_group AS primary_route_group,
       {{outcome(delivered.seq, delivered.route, delivered.route_group, delivered.provider, delivered.model,
                 primary_route.route_group, primary_route.provider, primary_route.model, last_decision)}} AS outcome
FROM per_workflow;

CREATE OR REPLACE TEMP VIEW fact_attempts AS
SELECT o.*,
       {{effective_route(o.route, o.route_group, o.provider, o.model,
                         w.primary_route_group, w.primary_provider, w.primary_model)}} AS effective_route,
       coalesce(o.seq = w.delivered_seq, false) AS delivered,
       -- Which limit a 429 hit: the kind its own response said was used up,
       -- else the one the attempt just before it on the same route said.
       CASE WHEN o.status = 'error' AND o.error_class = 'rate_limit'
            THEN coalesce(o.exhausted_kind,
                          CASE WHEN {{same_route(o.prev_route_group, o.prev_provider, o.prev_model,
                                                 o.route_group, o.provider, o.model)}}
                               THEN o.prev_exhausted_kind END,
                          'unknown') END AS limit_kind,
       {{cost_kind(o.cost_pusd, o.cost_currency, o.status, o.input_tokens, o.output_tokens,
                   o.cached_input_tokens, o.cache_write_input_tokens, o.web_search_requests)}} AS cost_kind,
       -- What selects the attempt's price (docs/prices.md): its day, tier,
       -- prompt size and billing account; and the kinds it used.
       {'day': o.started_at::DATE, 'tier': {{price_tier(o.batch, o.service_tier)}},
        'over': ({{prompt_over(o.input_tokens)}})::INTEGER, 'account': o.billing_account} AS price_key,
       -- (cost_kind is the column above: DuckDB reads an alias of the same list.)
       ({{priced_kinds(cost_kind, o.input_tokens, o.cached_input_tokens, o.cache_write_input_tokens,
                       o.cache_write_1h_input_tokens, o.output_tokens, o.reasoning_output_tokens,
                       o.web_search_requests)}})::UTINYINT AS priced_kinds,
       -- The workflow's own columns its attempts' rows carry, so that no
       -- reader joins the workflows a second time.
       w.first_at, w.workflow_name, w.outcome, w.attempts AS workflow_attempts, w.delivered_seq, w.outcome_ms,
       w.primary_provider, w.primary_model, w.primary_route_group,
       w.dim1 AS workflow_dim1, w.dim2 AS workflow_dim2, w.dim3 AS workflow_dim3
FROM temp.fact_ordered o
JOIN temp.fact_workflows w USING (workflow_id);

-- What tune reads (migrations/0015_steps.sql), and the audit's limits per
-- layer and route: every attempt of the workflows with more than one, in
-- their order. An attempt is a retry when it goes to the same route key as
-- the one before it; a layer's retries are counted per call of the layers
-- outside it (sdk inside gateway inside app inside queue: an attempt of an
-- outer layer starts a new call of every layer inside it).
CREATE OR REPLACE TEMP TABLE new_steps AS
WITH keyed AS NOT MATERIALIZED (
    SELECT a.*, lower(coalesce(a.route_group, a.provider || '/' || a.model)) AS route_key,
           CASE WHEN a.seq > 1 THEN CASE WHEN a.prev_status = 'error' THEN coalesce(a.prev_error_class, 'unknown')
                                         ELSE 'none' END END AS after_class
    FROM temp.fact_attempts a
    WHERE a.workflow_attempts > 1
),
-- The window functions run over the few columns they read, and their
-- results are joined back to the wide rows once: a window carries every
-- column of its input through its sort.
positions AS (
    SELECT workflow_id, seq, layer,
           coalesce(lag(route_key) OVER by_seq = route_key, false) AS retry,
           -- The latest attempt before this one of a layer outside this one's.
           CASE layer
               WHEN 'sdk' THEN max(CASE WHEN layer <> 'sdk' THEN seq END) OVER before_it
               WHEN 'gateway' THEN max(CASE WHEN layer IN ('app', 'queue') THEN seq END) OVER before_it
               WHEN 'app' THEN max(CASE WHEN layer = 'queue' THEN seq END) OVER before_it
           END AS call_seq,
           row_number() OVER (PARTITION BY workflow_id, route_key ORDER BY seq) AS route_attempt,
           max(epoch_us(started_at) + coalesce(duration_ms, 0) * 1000) OVER before_it AS end_before_us,
           -- The first fallback's position, layer and class (a struct is never NULL).
           arg_min({'seq': seq, 'layer': layer, 'class': after_class}, seq)
               FILTER (WHERE effective_route = 'fallback') OVER whole AS first_fallback,
           -- The shape (migrations/0017_shapes.sql): a sum of each position's
           -- hash, so no list is built (aggregating lists of structs cost five
           -- times this); the position is in each hash, so order counts.
           sum(hash(seq, layer, route_key, effective_route,
                    CASE WHEN status = 'error' THEN coalesce(error_class, 'unknown') END, deliverable, decision,
                    CASE WHEN commit_state IN ('committed', 'unknown') THEN commit_state
                         WHEN visible_output THEN 'visible_output' END)::HUGEINT) OVER whole AS shape_sum
    FROM keyed
    WINDOW by_seq AS (PARTITION BY workflow_id ORDER BY seq),
           before_it AS (PARTITION BY workflow_id ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
           whole AS (PARTITION BY workflow_id ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
),
layer_retries AS (
    SELECT workflow_id, seq, retry, call_seq, route_attempt, end_before_us, shape_sum,
           first_fallback.seq AS first_fallback_seq, first_fallback.layer AS fallback_layer,
           first_fallback.class AS fallback_class,
           CASE WHEN retry THEN row_number() OVER (PARTITION BY workflow_id, layer, coalesce(call_seq, 0), retry
                                                   ORDER BY seq) END AS layer_retry
    FROM positions
)
SELECT a.workflow_id, a.first_at, a.workflow_name, a.workflow_attempts AS attempts, a.outcome, a.delivered_seq,
       a.outcome_ms, hash(a.outcome, a.workflow_attempts, p.shape_sum) AS shape_key,
       lower(coalesce(a.primary_route_group, a.primary_provider || '/' || a.primary_model)) AS primary_route,
       a.seq, date_trunc('minute', a.started_at) AS attempt_minute,
       (epoch_us(a.started_at) - epoch_us(a.first_at)) / 1000.0 AS offset_ms,
       coalesce(a.duration_ms, 0) AS duration_ms,
       (p.end_before_us - epoch_us(a.first_at)) / 1000.0 AS end_before_ms,
       (epoch_us(a.latest_before) - epoch_us(a.first_at)) / 1000.0 AS prev_offset_ms,
       a.layer, a.route_key, a.effective_route, p.retry, p.layer_retry, p.route_attempt,
       a.status, CASE WHEN a.status = 'error' THEN coalesce(a.error_class, 'unknown') END AS error_class,
       a.after_class, a.deliverable, a.decision,
       CASE WHEN a.commit_state IN ('committed', 'unknown') THEN a.commit_state
            WHEN a.visible_output THEN 'visible_output' END AS commit_marker,
       -- A workflow whose first attempt is on a fallback route never moved to one.
       coalesce(a.seq = p.first_fallback_seq AND p.first_fallback_seq > 1, false) AS first_fallback,
       coalesce(a.seq >= p.first_fallback_seq AND p.first_fallback_seq > 1, false) AS from_fallback,
       CASE WHEN a.seq >= p.first_fallback_seq AND p.first_fallback_seq > 1 THEN p.fallback_layer END
           AS fallback_layer,
       CASE WHEN a.seq >= p.first_fallback_seq AND p.first_fallback_seq > 1 THEN p.fallback_class END
           AS fallback_class,
       a.served_provider, a.served_model, a.cost_kind, a.price_key, a.priced_kinds,
       coalesce(a.input_tokens, 0) AS input_tokens, coalesce(a.output_tokens, 0) AS output_tokens,
       coalesce(a.cached_input_tokens, 0) AS cached_input_tokens,
       coalesce(a.cache_write_input_tokens, 0) AS cache_write_input_tokens,
       coalesce(a.cost_pusd, 0) AS emitter_cost_pusd,
       coalesce(a.reasoning_output_tokens, 0) AS reasoning_output_tokens,
       coalesce(a.cache_write_1h_input_tokens, 0) AS cache_write_1h_input_tokens,
       coalesce(a.web_search_requests, 0) AS web_search_requests
FROM keyed a
JOIN layer_retries p USING (workflow_id, seq);

-- Each retried workflow's shape key and its attempts' times in order:
-- what a replay by shape reads of a workflow it changes.
CREATE OR REPLACE TEMP TABLE new_times AS
SELECT workflow_id, any_value(first_at) AS first_at, any_value(workflow_name) AS workflow_name,
       any_value(shape_key) AS shape_key, any_value(outcome_ms) AS outcome_ms,
       list(offset_ms ORDER BY seq) AS step_offsets_ms, list(duration_ms ORDER BY seq) AS step_durations_ms
FROM temp.new_steps
GROUP BY workflow_id;

CREATE OR REPLACE TEMP TABLE new_facts AS
WITH first_fallback AS (
    SELECT workflow_id, min(seq) AS fallback_seq
    FROM temp.fact_attempts
    WHERE effective_route = 'fallback'
    GROUP BY workflow_id
),
fallbacks AS (
    SELECT a.workflow_id,
           coalesce(arg_max(coalesce(a.error_class, 'unknown'), a.seq)
                        FILTER (WHERE a.status = 'error' AND a.seq < f.fallback_seq), 'none') AS reason,
           max({'provider': a.provider, 'model': a.model, 'route_group': a.route_group})
               FILTER (WHERE a.seq = f.fallback_seq) AS route
    FROM temp.fact_attempts a
    JOIN first_fallback f ON f.workflow_id = a.workflow_id
    WHERE a.seq <= f.fallback_seq
    GROUP BY a.workflow_id
)
SELECT w.workflow_id, w.workflow_name, w.first_at, w.earliest_at, w.last_at, w.attempts, w.n_sdk, w.n_gateway,
       w.n_app, w.n_queue, w.delivered_at, w.delivered_seq, w.primary_provider, w.primary_model,
       w.primary_route_group, w.outcome, w.outcome_ms,
       f.route.provider AS fallback_provider, f.route.model AS fallback_model,
       f.route.route_group AS fallback_route_group, f.reason AS fallback_reason,
       w.dim1, w.dim2, w.dim3, t.shape_key
FROM temp.fact_workflows w
LEFT JOIN fallbacks f USING (workflow_id)
LEFT JOIN temp.new_times t USING (workflow_id);

CREATE OR REPLACE TEMP TABLE new_spend AS
SELECT a.workflow_id, a.first_at, a.workflow_name, a.outcome, a.workflow_dim1 AS dim1, a.workflow_dim2 AS dim2,
       a.workflow_dim3 AS dim3, date_trunc('minute', a.started_at) AS attempt_minute, a.layer, a.provider, a.model,
       a.served_provider, a.served_model, a.status, a.error_class, a.seq > 1 AS retry, a.delivered,
       a.cost_kind, a.price_key, a.priced_kinds, count(*) AS attempts,
       int64_of(coalesce(sum(a.input_tokens), 0), 'workflow_spend.input_tokens') AS input_tokens,
       int64_of(coalesce(sum(a.output_tokens), 0), 'workflow_spend.output_tokens') AS output_tokens,
       int64_of(coalesce(sum(a.cached_input_tokens), 0), 'workflow_spend.cached_input_tokens') AS cached_input_tokens,
       int64_of(coalesce(sum(a.cache_write_input_tokens), 0), 'workflow_spend.cache_write_input_tokens') AS cache_write_input_tokens,
       int64_of(coalesce(sum(a.cost_pusd), 0), 'workflow_spend.emitter_cost_pusd') AS emitter_cost_pusd,
       int64_of(coalesce(sum(a.reasoning_output_tokens), 0), 'workflow_spend.reasoning_output_tokens')
           AS reasoning_output_tokens,
       int64_of(coalesce(sum(a.cache_write_1h_input_tokens), 0), 'workflow_spend.cache_write_1h_input_tokens')
           AS cache_write_1h_input_tokens,
       int64_of(coalesce(sum(a.web_search_requests), 0), 'workflow_spend.web_search_requests') AS web_search_requests,
       a.limit_kind,
       NOT same_route(a.primary_route_group, a.primary_provider, a.primary_model,
                      a.route_group, a.provider, a.model) AS off_primary
FROM temp.fact_attempts a
WHERE a.workflow_attempts > 1
GROUP BY ALL
UNION ALL
-- A workflow of one attempt is one group already.
SELECT a.workflow_id, a.first_at, a.workflow_name, a.outcome, a.workflow_dim1 AS dim1, a.workflow_dim2 AS dim2,
       a.workflow_dim3 AS dim3, date_trunc('minute', a.started_at) AS attempt_minute, a.layer, a.provider, a.model,
       a.served_provider, a.served_model, a.status, a.error_class, a.seq > 1 AS retry, a.delivered,
       a.cost_kind, a.price_key, a.priced_kinds, 1::BIGINT AS attempts,
       int64_of(coalesce(a.input_tokens, 0), 'workflow_spend.input_tokens') AS input_tokens,
       int64_of(coalesce(a.output_tokens, 0), 'workflow_spend.output_tokens') AS output_tokens,
       int64_of(coalesce(a.cached_input_tokens, 0), 'workflow_spend.cached_input_tokens') AS cached_input_tokens,
       int64_of(coalesce(a.cache_write_input_tokens, 0), 'workflow_spend.cache_write_input_tokens') AS cache_write_input_tokens,
       int64_of(coalesce(a.cost_pusd, 0), 'workflow_spend.emitter_cost_pusd') AS emitter_cost_pusd,
       int64_of(coalesce(a.reasoning_output_tokens, 0), 'workflow_spend.reasoning_output_tokens')
           AS reasoning_output_tokens,
       int64_of(coalesce(a.cache_write_1h_input_tokens, 0), 'workflow_spend.cache_write_1h_input_tokens')
           AS cache_write_1h_input_tokens,
       int64_of(coalesce(a.web_search_requests, 0), 'workflow_spend.web_search_requests') AS web_search_requests,
       a.limit_kind, false AS off_primary
FROM temp.fact_attempts a
WHERE a.workflow_attempts = 1;

-- What each workflow's attempts said remained, per served route, billing
-- account and kind, and its 429s by the kind they hit (migrations/
-- 0022_headroom.sql). Ties in time go to the later attempt in order.
CREATE OR REPLACE TEMP TABLE new_headroom AS
WITH stated AS (
    SELECT workflow_id, first_at, workflow_name, served_provider, served_model, billing_account, started_at, seq,
           h.kind AS kind, h.remaining AS remaining, h.lim AS lim,
           -- A limit of 0 or none states no share.
           CASE WHEN h.lim > 0 THEN h.remaining / h.lim END AS ratio, false AS limited
    FROM (SELECT *, unnest(headroom) AS h FROM temp.fact_attempts WHERE headroom IS NOT NULL)
    WHERE h.remaining IS NOT NULL
    UNION ALL
    SELECT workflow_id, first_at, workflow_name, served_provider, served_model, billing_account, started_at, seq,
           limit_kind AS kind, NULL AS remaining, NULL AS lim, NULL AS ratio, true AS limited
    FROM temp.fact_attempts
    WHERE limit_kind IS NOT NULL
)
SELECT workflow_id, any_value(first_at) AS first_at, any_value(workflow_name) AS workflow_name,
       served_provider, served_model, billing_account, kind,
       count(remaining) AS observations,
       max(started_at) FILTER (WHERE remaining IS NOT NULL) AS last_at,
       arg_max(remaining, {'at': started_at, 'seq': seq}) FILTER (WHERE remaining IS NOT NULL) AS last_remaining,
       arg_max(lim, {'at': started_at, 'seq': seq}) FILTER (WHERE remaining IS NOT NULL) AS last_limit,
       min(ratio) AS min_ratio,
       arg_min(started_at, {'ratio': ratio, 'at': started_at}) FILTER (WHERE ratio IS NOT NULL) AS min_at,
       count(*) FILTER (WHERE ratio < 0.1) AS below_10pct,
       min(started_at) FILTER (WHERE ratio < 0.1) AS first_below_10pct_at,
       count(*) FILTER (WHERE limited) AS rate_limited,
       min(started_at) FILTER (WHERE limited) AS first_429_at
FROM stated
GROUP BY workflow_id, served_provider, served_model, billing_account, kind;

CREATE OR REPLACE TEMP TABLE new_latency AS
WITH observations AS (
    SELECT *,
           -- The smallest bound at or above the observation; NULL above the last.
           list_filter(getvariable('latency_buckets'), lambda bound: ms / 1000.0 <= bound)[1] AS le
    FROM (SELECT workflow_id, first_at, workflow_name, provider, model, status, 'duration' AS metric,
                 duration_ms AS ms, workflow_attempts
          FROM temp.fact_attempts
          WHERE duration_ms IS NOT NULL
          UNION ALL
          SELECT workflow_id, first_at, workflow_name, provider, model, status, 'ttft' AS metric, ttft_ms AS ms,
                 workflow_attempts
          FROM temp.fact_attempts
          WHERE ttft_ms IS NOT NULL)
)
SELECT workflow_id, first_at, workflow_name, provider, model, status, metric, le,
       count(*) AS observations,
       int64_of(sum(round(ms * 1000)::BIGINT), 'workflow_latency.sum_us') AS sum_us
FROM observations
WHERE workflow_attempts > 1
GROUP BY workflow_id, first_at, workflow_name, provider, model, status, metric, le
UNION ALL
-- A workflow of one attempt has one observation of each metric at most.
SELECT workflow_id, first_at, workflow_name, provider, model, status, metric, le, 1::BIGINT AS observations,
       round(ms * 1000)::BIGINT AS sum_us
FROM observations
WHERE workflow_attempts = 1;

CREATE OR REPLACE TEMP TABLE new_findings AS
WITH same_provider AS (
    -- The attempt before each one to the same provider, in workflows where
    -- some failure asked to wait (retry_after_ignored's only input).
    SELECT workflow_id, seq,
           lag({'status': status, 'error_class': error_class, 'started_at': started_at,
                'duration_ms': duration_ms, 'retry_after_ms': retry_after_ms})
               OVER (PARTITION BY workflow_id, provider ORDER BY seq) AS prev_same_provider
    FROM temp.fact_attempts
    WHERE workflow_id IN (SELECT workflow_id FROM temp.fact_attempts
                          WHERE status = 'error' AND retry_after_ms IS NOT NULL)
),
previous AS (
    SELECT a.workflow_id, a.seq, a.started_at, a.layer, a.provider, a.model, a.route_group, a.status, a.error_class,
           a.decision, a.served_provider, a.served_model, a.cost_kind, a.price_key, a.priced_kinds, a.delivered,
           a.effective_route, a.input_tokens, a.output_tokens, a.cached_input_tokens, a.cache_write_input_tokens,
           a.cost_pusd, a.reasoning_output_tokens, a.cache_write_1h_input_tokens, a.web_search_requests,
           a.prev_status, coalesce(a.prev_error_class, 'unknown') AS prev_class, a.committed_before,
           a.latest_before, a.has_next, p.prev_same_provider, a.workflow_attempts, a.first_at, a.workflow_name,
           same_route(a.prev_route_group, a.prev_provider, a.prev_model, a.route_group, a.provider, a.model)
               AS same_as_previous
    FROM temp.fact_attempts a
    LEFT JOIN same_provider p USING (workflow_id, seq)
),
broken AS (
    SELECT *, CASE WHEN same_as_previous THEN 'retry_after_error' ELSE 'fallback_after_error' END AS kind,
           prev_class AS class
    FROM previous WHERE prev_status = 'error'
    UNION ALL BY NAME
    SELECT *, 'replay_after_commit' AS kind, committed_before AS class
    FROM previous WHERE committed_before IS NOT NULL
    UNION ALL BY NAME
    SELECT *, 'retry_after_ignored' AS kind, coalesce(prev_same_provider.error_class, 'unknown') AS class
    FROM previous
    WHERE prev_same_provider.status = 'error' AND prev_same_provider.retry_after_ms IS NOT NULL
      AND started_at < prev_same_provider.started_at
                       + to_microseconds(round((coalesce(prev_same_provider.duration_ms, 0)
                                          + prev_same_provider.retry_after_ms - 1000) * 1000)::BIGINT)
    UNION ALL BY NAME
    SELECT *, 'timeout_output_retried' AS kind, 'timeout' AS class
    FROM previous
    WHERE status = 'error' AND error_class = 'timeout' AND coalesce(output_tokens, 0) > 0 AND has_next
    UNION ALL BY NAME
    SELECT *, 'fallback_route' AS kind, lower(coalesce(route_group, provider || '/' || model)) AS class
    FROM previous WHERE effective_route = 'fallback'
    UNION ALL BY NAME
    SELECT *, 'queued' AS kind,
           CASE WHEN decision = 'queue' THEN 'queue_decision' ELSE 'queue_redelivery' END AS class
    FROM previous WHERE decision = 'queue' OR layer = 'queue'
),
stacked AS (
    SELECT workflow_id, string_agg(DISTINCT layer, '+' ORDER BY layer) AS layers
    FROM broken
    WHERE kind = 'retry_after_error'
    GROUP BY workflow_id
    HAVING count(DISTINCT layer) > 1
),
every_kind AS (
    SELECT * FROM broken
    UNION ALL BY NAME
    SELECT b.* REPLACE ('stacked_retry' AS kind, s.layers AS class)
    FROM broken b JOIN stacked s USING (workflow_id)
    WHERE b.kind = 'retry_after_error'
)
-- A rule's attempts are summed by what a report groups them by.
SELECT b.workflow_id, b.first_at, b.workflow_name, b.kind, b.class, b.layer, b.served_provider, b.served_model,
       b.cost_kind, b.price_key, b.priced_kinds, count(*) AS attempts,
       int64_of(coalesce(sum(b.input_tokens), 0), 'workflow_findings.input_tokens') AS input_tokens,
       int64_of(coalesce(sum(b.output_tokens), 0), 'workflow_findings.output_tokens') AS output_tokens,
       int64_of(coalesce(sum(b.cached_input_tokens), 0), 'workflow_findings.cached_input_tokens') AS cached_input_tokens,
       int64_of(coalesce(sum(b.cache_write_input_tokens), 0), 'workflow_findings.cache_write_input_tokens') AS cache_write_input_tokens,
       int64_of(coalesce(sum(b.cost_pusd), 0), 'workflow_findings.emitter_cost_pusd') AS emitter_cost_pusd,
       int64_of(coalesce(sum(b.reasoning_output_tokens), 0), 'workflow_findings.reasoning_output_tokens')
           AS reasoning_output_tokens,
       int64_of(coalesce(sum(b.cache_write_1h_input_tokens), 0), 'workflow_findings.cache_write_1h_input_tokens')
           AS cache_write_1h_input_tokens,
       int64_of(coalesce(sum(b.web_search_requests), 0), 'workflow_findings.web_search_requests')
           AS web_search_requests
FROM every_kind b
GROUP BY ALL;
