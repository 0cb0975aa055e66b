-- tune_steps.sql: what a replay reads (docs/record-format.md, "Tuning
-- recovery"): every attempt of the window's workflows with more than one,
-- priced, in each workflow's order. The replay's limits are applied to
-- these rows by attempt_core::replay, one workflow at a time: each rule
-- there is a decision about the next attempt given the ones kept before it,
-- which SQL would state as a recursion over positions.
--
-- Parameters: the scope_* variables and the in_window macro of window.sql;
--   temp.prices and the macros of cost.sql.
-- Columns, one row per attempt:
--   workflow_id, workflow_name, outcome, outcome_ms   the workflow's
--   start_us             the attempt's start, epoch microseconds
--   offset_ms, duration_ms, layer, route_key, effective_route, error_class,
--   deliverable, decision, commit_marker   as in workflow_steps
--   tokens               input plus output tokens
--   cost_pusd            known cost, pico-USD
--   cost_unknown         its cost is unknown (no usage reported, or no price)
SELECT s.workflow_id, s.workflow_name, s.outcome, s.outcome_ms,
       epoch_us(s.first_at) + round(s.offset_ms * 1000)::BIGINT AS start_us,
       s.offset_ms, s.duration_ms, s.layer, s.route_key, s.effective_route, s.error_class, s.deliverable,
       s.decision, s.commit_marker, (s.input_tokens + s.output_tokens)::HUGEINT AS tokens,
       known_cost_pusd(s.cost_kind, s.emitter_cost_pusd, s.input_tokens, s.cached_input_tokens,
                       s.cache_write_input_tokens, s.output_tokens, pr.input_pusd, pr.cached_input_pusd,
                       pr.cache_write_pusd, pr.output_pusd) AS cost_pusd,
       cost_is_unknown(s.cost_kind, pr.served_model) AS cost_unknown
FROM workflow_steps s
LEFT JOIN temp.prices pr ON pr.served_provider = s.served_provider AND pr.served_model = s.served_model
WHERE in_window(s.first_at, s.workflow_name)
ORDER BY s.workflow_id, s.seq;
