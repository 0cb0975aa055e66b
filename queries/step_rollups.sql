-- step_rollups.sql: the value-of-each-retry curve's sums (docs/record-format.md,
-- "Tuning recovery") by minute, in the shape of rollup_steps
-- (migrations/0016_step_rollups.sql). Like rollups.sql, only sums and
-- counts: a set of workflows adds up from its parts, so tune_curve.sql adds
-- whole minutes to edge minutes, and a write adds new rows minus old ones.
-- Not a report itself: it builds temp.r_steps.
--
-- Parameters: temp.rollup_steps_source: rows shaped like workflow_steps plus
--   sign BIGINT (+1 adds the workflow, -1 takes its old rows away); the
--   macro kept_label (labels.sql) and its variable fold_labels.
-- Only the attempts that can buy success count: positions 2 and later, up
--   to the workflow's delivery (nothing a policy stops after it changes the
--   outcome). Workflow names and primary routes are folded by kept_label;
--   the served provider and model are kept whole (they key the price table).
-- Columns: those of rollup_steps, in its order. Groups whose every measure
--   sums to 0 are dropped.
CREATE OR REPLACE TEMP TABLE r_steps AS
SELECT * FROM (
    SELECT date_trunc('minute', first_at) AS minute, kept_label('workflow', workflow_name) AS workflow_name,
           least(seq, 16) AS position, seq >= 16 AS and_later, layer, after_class,
           kept_label('primary_route', primary_route) AS primary_route,
           first_fallback, from_fallback, fallback_layer, fallback_class, served_provider, served_model, cost_kind,
           coalesce(sum(sign) FILTER (WHERE seq <= 16), 0)::BIGINT AS reached,
           coalesce(sum(sign) FILTER (WHERE deliverable AND seq = delivered_seq), 0)::BIGINT AS delivered,
           sum(sign)::BIGINT AS attempts,
           sum(sign * input_tokens)::HUGEINT AS input_tokens,
           sum(sign * output_tokens)::HUGEINT AS output_tokens,
           sum(sign * cached_input_tokens)::HUGEINT AS cached_input_tokens,
           sum(sign * cache_write_input_tokens)::HUGEINT AS cache_write_input_tokens,
           sum(sign * emitter_cost_pusd)::HUGEINT AS emitter_cost_pusd,
           -- Whole microseconds, so that sums do not depend on row order.
           sum(sign * round(greatest(offset_ms + duration_ms - end_before_ms, 0) * 1000)::BIGINT)::HUGEINT
               AS added_us,
           sum(sign * CASE WHEN first_fallback THEN round(greatest(outcome_ms - end_before_ms, 0) * 1000)::BIGINT
                           ELSE 0 END)::HUGEINT AS added_to_outcome_us
    FROM temp.rollup_steps_source
    WHERE seq > 1 AND (delivered_seq IS NULL OR seq <= delivered_seq)
    GROUP BY ALL
)
WHERE reached <> 0 OR delivered <> 0 OR attempts <> 0 OR input_tokens <> 0 OR output_tokens <> 0
   OR cached_input_tokens <> 0 OR cache_write_input_tokens <> 0 OR emitter_cost_pusd <> 0
   OR added_us <> 0 OR added_to_outcome_us <> 0;
