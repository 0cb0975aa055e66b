-- tune_replay.sql: the figures of a replay by shape (docs/record-format.md,
-- "Tuning recovery"): the window's shape sums (tune_shapes.sql) of every
-- shape a plan changes, split by what the plan keeps, priced. A replay is
-- a sum over attempts, so it is summed here like the report's; what each
-- shape's plan keeps is decided once per shape by attempt_core::replay.
--
-- Parameters: temp.tune_shape_sums (tune_shapes.sql); temp.tune_plans
--   (store::tune: per policy section and shape, what the replay decided:
--   changed, lost, moved, kept (bit n-1 for position n), delivered and
--   recorded_delivered (positions from 0; NULL: none), recorded_outcome
--   and outcome (places in tune_outcomes)); the macro tune_section(name)
--   (store::tune: the policy section a workflow name replays under);
--   temp.prices and the macros of cost.sql.
-- Columns, one row per group of a changed shape's attempts:
--   section, recorded_outcome, outcome, moved, lost   the plan's, for the workflows
--   first                the attempts at position 1 (one per workflow)
--   kept                 the plan keeps these attempts
--   delivers             they deliver the replayed workflow
--   delivered            they delivered the recorded workflow
--   attempts, tokens (input plus output), cost_pusd (known), unknown_cost_attempts
WITH grouped AS (
    SELECT p.section, p.recorded_outcome, p.outcome, p.moved, p.lost, s.seq = 1 AS first,
           ((p.kept >> (s.seq - 1)::INTEGER) & 1::UBIGINT) = 1 AS kept,
           coalesce(s.seq - 1 = p.delivered, false) AS delivers,
           coalesce(s.seq - 1 = p.recorded_delivered, false) AS delivered,
           s.served_provider, s.served_model, s.cost_kind, s.price_key, s.priced_kinds,
           sum(s.attempts)::BIGINT AS attempts, sum(s.input_tokens)::HUGEINT AS input_tokens,
           sum(s.cached_input_tokens)::HUGEINT AS cached_input_tokens,
           sum(s.cache_write_input_tokens)::HUGEINT AS cache_write_input_tokens,
           sum(s.cache_write_1h_input_tokens)::HUGEINT AS cache_write_1h_input_tokens,
           sum(s.output_tokens)::HUGEINT AS output_tokens,
           sum(s.reasoning_output_tokens)::HUGEINT AS reasoning_output_tokens,
           sum(s.web_search_requests)::HUGEINT AS web_search_requests,
           sum(s.emitter_cost_pusd)::HUGEINT AS emitter_cost_pusd
    FROM temp.tune_shape_sums s
    JOIN temp.tune_plans p
      ON p.shape_key = s.shape_key
     AND p.section = tune_section(s.workflow_name)
    WHERE p.changed
    GROUP BY ALL
)
SELECT g.section, g.recorded_outcome, g.outcome, g.moved, g.lost, g.first, g.kept, g.delivers, g.delivered,
       sum(g.attempts)::BIGINT AS attempts,
       sum(g.input_tokens + g.output_tokens)::HUGEINT AS tokens,
       sum(known_cost_of(g.cost_kind, g.emitter_cost_pusd, g.priced))::HUGEINT AS cost_pusd,
       sum(CASE WHEN unknown_reason_of(g.cost_kind, g.price, g.unpriced, g.priced) IS NOT NULL
                THEN g.attempts ELSE 0 END)::BIGINT AS unknown_cost_attempts
-- Priced once: the cost and why it is unknown both read `priced`.
FROM priced_rows(grouped) g
GROUP BY ALL;
