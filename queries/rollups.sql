-- rollups.sql: per-workflow facts summed by minute (the shapes of
-- rollup_workflows, rollup_attempts and rollup_latency in
-- migrations/0004_facts.sql and 0005). Only sums and counts: a rollup of a set of
-- workflows is the sum of the rollups of its parts, so a window adds whole
-- minutes to edge minutes and the all-time totals take signed deltas.
-- Not a report itself: it builds temp.r_workflows, temp.r_attempts,
-- temp.r_latency and temp.r_recovery.
--
-- Parameters: temp.rollup_source, temp.rollup_spend_source and
--   temp.rollup_latency_source: rows shaped like workflow_facts,
--   workflow_spend and workflow_latency plus sign BIGINT: +1 adds the
--   workflow, -1 takes it away (a workflow's old rows, when a write derived
--   them again); the macro kept_label (labels.sql) and its variable
--   fold_labels; the variable recovery_buckets (BIGINT[]: the recovery-time
--   histogram's bounds, microseconds, ascending); the macro int64_of
--   (bounds.sql): each sum is a checked BIGINT.
-- Workflow names, primary and fallback routes and dimension values are
--   folded by kept_label (bounded labels). The requested and served
--   provider and model of rollup_attempts and rollup_latency are kept whole:
--   they key the price table and the reroute count, so folding them would
--   make costs unknown; /metrics folds them when it writes its series. So
--   are price_key (day, tier, prompt size, billing account) and
--   priced_kinds: they select the price (docs/prices.md).
-- Columns: those of the rollup tables, in their order. `minute` is the minute of the
--   workflow's first attempt (outcomes are counted there); rollup_attempts
--   also keeps each attempt's own minute (the per-minute retry budget).
--   Groups whose every measure sums to 0 are dropped, so adding then taking
--   away a workflow leaves nothing behind (a group whose count cancels but
--   whose tokens do not, as when a trace's attempt is derived again with
--   other usage, is kept: its tokens still move).
CREATE OR REPLACE TEMP TABLE r_workflows AS
SELECT date_trunc('minute', first_at) AS minute, kept_label('workflow', workflow_name) AS workflow_name,
       kept_label('provider', primary_provider) AS primary_provider,
       kept_label('model', primary_model) AS primary_model,
       kept_label('route_group', primary_route_group) AS primary_route_group, outcome,
       kept_label('provider', fallback_provider) AS fallback_provider,
       kept_label('model', fallback_model) AS fallback_model,
       kept_label('route_group', fallback_route_group) AS fallback_route_group,
       fallback_reason, attempts AS n_all, n_sdk, n_gateway, n_app, n_queue,
       sum(sign)::BIGINT AS workflows,
       kept_label('dim1', dim1) AS dim1, kept_label('dim2', dim2) AS dim2, kept_label('dim3', dim3) AS dim3
FROM temp.rollup_source
GROUP BY ALL
HAVING sum(sign) <> 0;

CREATE OR REPLACE TEMP TABLE r_attempts AS
SELECT date_trunc('minute', first_at) AS minute, s.attempt_minute, kept_label('workflow', workflow_name) AS workflow_name,
       outcome, s.layer,
       s.provider, s.model, s.served_provider, s.served_model, s.status, s.error_class, s.retry,
       s.delivered, s.cost_kind, s.price_key, s.priced_kinds,
       sum(sign * s.attempts)::BIGINT AS attempts,
       int64_of(sum(sign * s.input_tokens), 'rollup_attempts.input_tokens') AS input_tokens,
       int64_of(sum(sign * s.output_tokens), 'rollup_attempts.output_tokens') AS output_tokens,
       int64_of(sum(sign * s.cached_input_tokens), 'rollup_attempts.cached_input_tokens') AS cached_input_tokens,
       int64_of(sum(sign * s.cache_write_input_tokens), 'rollup_attempts.cache_write_input_tokens') AS cache_write_input_tokens,
       int64_of(sum(sign * s.emitter_cost_pusd), 'rollup_attempts.emitter_cost_pusd') AS emitter_cost_pusd,
       kept_label('dim1', dim1) AS dim1, kept_label('dim2', dim2) AS dim2, kept_label('dim3', dim3) AS dim3,
       s.limit_kind,
       int64_of(sum(sign * s.reasoning_output_tokens), 'rollup_attempts.reasoning_output_tokens')
           AS reasoning_output_tokens,
       int64_of(sum(sign * s.cache_write_1h_input_tokens), 'rollup_attempts.cache_write_1h_input_tokens')
           AS cache_write_1h_input_tokens,
       int64_of(sum(sign * s.web_search_requests), 'rollup_attempts.web_search_requests') AS web_search_requests
FROM temp.rollup_spend_source s
GROUP BY ALL
HAVING sum(sign * s.attempts) <> 0 OR sum(sign * s.input_tokens) <> 0 OR sum(sign * s.output_tokens) <> 0
    OR sum(sign * s.cached_input_tokens) <> 0 OR sum(sign * s.cache_write_input_tokens) <> 0
    OR sum(sign * s.emitter_cost_pusd) <> 0 OR sum(sign * s.reasoning_output_tokens) <> 0
    OR sum(sign * s.cache_write_1h_input_tokens) <> 0 OR sum(sign * s.web_search_requests) <> 0;

CREATE OR REPLACE TEMP TABLE r_latency AS
SELECT date_trunc('minute', first_at) AS minute, l.provider, l.model, l.status, l.metric, l.le,
       sum(sign * l.observations)::BIGINT AS observations,
       int64_of(sum(sign * l.sum_us), 'rollup_latency.sum_us') AS sum_us
FROM temp.rollup_latency_source l
GROUP BY ALL
HAVING sum(sign * l.observations) <> 0 OR sum(sign * l.sum_us) <> 0;

-- Recovered workflows by the histogram bucket of their recovery time (first
-- attempt to delivered attempt, whole microseconds; le_us NULL above the
-- last bound), with the exact sum.
CREATE OR REPLACE TEMP TABLE r_recovery AS
SELECT date_trunc('minute', first_at) AS minute, kept_label('workflow', workflow_name) AS workflow_name, outcome,
       list_filter(getvariable('recovery_buckets'), lambda bound: us <= bound)[1] AS le_us,
       sum(sign)::BIGINT AS workflows, int64_of(sum(sign * us), 'rollup_recovery.sum_us') AS sum_us
FROM (SELECT *, epoch_us(delivered_at) - epoch_us(first_at) AS us FROM temp.rollup_source
      WHERE outcome IN ('retry_recovery', 'fallback_recovery'))
GROUP BY ALL
HAVING sum(sign) <> 0 OR sum(sign * us) <> 0;
