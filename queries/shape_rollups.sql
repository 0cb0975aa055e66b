-- shape_rollups.sql: what replays by shape sum (docs/record-format.md,
-- "Tuning recovery"), in the shape of total_shapes
-- (migrations/0017_shapes.sql). Only sums: a write adds its new rows minus
-- its old ones, and a window sums its own steps.
-- Not a report itself: it builds temp.r_shapes.
--
-- Parameters: temp.shape_steps_source: rows shaped like workflow_steps
--   plus sign BIGINT (+1 adds the workflow, -1 takes its old rows away);
--   the macro kept_label (labels.sql) and its variable fold_labels.
-- Columns: those of total_shapes, in its order. Groups whose every measure
--   sums to 0 are dropped.
CREATE OR REPLACE TEMP TABLE r_shapes AS
SELECT * FROM (
    SELECT kept_label('workflow', workflow_name) AS workflow_name, shape_key, seq, served_provider, served_model,
           cost_kind, price_key, priced_kinds,
           sum(sign)::BIGINT AS attempts,
           sum(sign * input_tokens)::HUGEINT AS input_tokens,
           sum(sign * output_tokens)::HUGEINT AS output_tokens,
           sum(sign * cached_input_tokens)::HUGEINT AS cached_input_tokens,
           sum(sign * cache_write_input_tokens)::HUGEINT AS cache_write_input_tokens,
           sum(sign * emitter_cost_pusd)::HUGEINT AS emitter_cost_pusd,
           sum(sign * reasoning_output_tokens)::HUGEINT AS reasoning_output_tokens,
           sum(sign * cache_write_1h_input_tokens)::HUGEINT AS cache_write_1h_input_tokens,
           sum(sign * web_search_requests)::HUGEINT AS web_search_requests
    FROM temp.shape_steps_source
    GROUP BY ALL
)
WHERE attempts <> 0 OR input_tokens <> 0 OR output_tokens <> 0 OR cached_input_tokens <> 0
   OR cache_write_input_tokens <> 0 OR emitter_cost_pusd <> 0 OR reasoning_output_tokens <> 0
   OR cache_write_1h_input_tokens <> 0 OR web_search_requests <> 0;
