-- step_rollups.sql: the value-of-each-retry curve's sums (docs/record-format.md,
-- "Tuning recovery") by minute, in the shape of rollup_steps
-- (migrations/0016_step_rollups.sql). Like rollups.sql, only sums and
-- counts: a set of workflows adds up from its parts, so tune_curve.sql adds
-- whole minutes to edge minutes, and a write adds new rows minus old ones.
-- Not a report itself: it builds temp.r_steps.
--
-- Parameters: temp.rollup_steps_source: rows shaped like workflow_steps plus
--   sign BIGINT (+1 adds the workflow, -1 takes its old rows away); the
--   macro kept_label (labels.sql) and its variable fold_labels; the macro
--   int64_of (bounds.sql): each sum is a checked BIGINT.
-- Only the attempts that can buy success count: positions 2 and later, up
--   to the workflow's delivery (nothing a policy stops after it changes the
--   outcome). Workflow names and primary routes are folded by kept_label;
--   the served provider and model, price_key and priced_kinds are kept
--   whole (they select the price).
-- Columns: those of rollup_steps, in its order. Groups whose every measure
--   sums to 0 are dropped.
CREATE OR REPLACE TEMP TABLE r_steps AS
SELECT * FROM (
    SELECT date_trunc('minute', first_at) AS minute, kept_label('workflow', workflow_name) AS workflow_name,
           least(seq, 16) AS position, seq >= 16 AS and_later, layer, after_class,
           kept_label('primary_route', primary_route) AS primary_route,
           first_fallback, from_fallback, fallback_layer, fallback_class, served_provider, served_model, cost_kind,
           price_key, priced_kinds,
           coalesce(sum(sign) FILTER (WHERE seq <= 16), 0)::BIGINT AS reached,
           coalesce(sum(sign) FILTER (WHERE deliverable AND seq = delivered_seq), 0)::BIGINT AS delivered,
           sum(sign)::BIGINT AS attempts,
           int64_of(sum(sign * input_tokens), 'rollup_steps.input_tokens') AS input_tokens,
           int64_of(sum(sign * output_tokens), 'rollup_steps.output_tokens') AS output_tokens,
           int64_of(sum(sign * cached_input_tokens), 'rollup_steps.cached_input_tokens') AS cached_input_tokens,
           int64_of(sum(sign * cache_write_input_tokens), 'rollup_steps.cache_write_input_tokens') AS cache_write_input_tokens,
           int64_of(sum(sign * emitter_cost_pusd), 'rollup_steps.emitter_cost_pusd') AS emitter_cost_pusd,
           int64_of(sum(sign * reasoning_output_tokens), 'rollup_steps.reasoning_output_tokens')
               AS reasoning_output_tokens,
           int64_of(sum(sign * cache_write_1h_input_tokens), 'rollup_steps.cache_write_1h_input_tokens')
               AS cache_write_1h_input_tokens,
           int64_of(sum(sign * web_search_requests), 'rollup_steps.web_search_requests') AS web_search_requests,
           -- Whole microseconds, so that sums do not depend on row order.
           int64_of(sum(sign * round(greatest(offset_ms + duration_ms - end_before_ms, 0) * 1000)::BIGINT),
                    'rollup_steps.added_us') AS added_us,
           int64_of(sum(sign * CASE WHEN first_fallback THEN round(greatest(outcome_ms - end_before_ms, 0) * 1000)::BIGINT
                           ELSE 0 END), 'rollup_steps.added_to_outcome_us') AS added_to_outcome_us
    FROM temp.rollup_steps_source
    WHERE seq > 1 AND (delivered_seq IS NULL OR seq <= delivered_seq)
    GROUP BY ALL
)
WHERE reached <> 0 OR delivered <> 0 OR attempts <> 0 OR input_tokens <> 0 OR output_tokens <> 0
   OR cached_input_tokens <> 0 OR cache_write_input_tokens <> 0 OR emitter_cost_pusd <> 0
   OR reasoning_output_tokens <> 0 OR cache_write_1h_input_tokens <> 0 OR web_search_requests <> 0
   OR added_us <> 0 OR added_to_outcome_us <> 0;
