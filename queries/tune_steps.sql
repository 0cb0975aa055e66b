-- tune_steps.sql: what a replay reads (docs/record-format.md, "Tuning
-- recovery"): every attempt of the window's workflows with more than one,
-- priced, in each workflow's order. The replay's limits are applied to
-- these rows by attempt_core::replay, one attempt at a time: each rule
-- there is a decision about the next attempt given the ones kept before it,
-- which SQL would state as a recursion over positions. Enums travel as
-- their place in the lists the reader sets (read as numbers, a million
-- rows cost a fifth of what their names did).
--
-- Parameters: the scope_* variables and the in_window macro of window.sql;
--   temp.prices and the macros of cost.sql; the variables tune_layers,
--   tune_classes, tune_decisions, tune_markers and tune_outcomes (VARCHAR[]:
--   each enum's names in the reader's order).
-- Columns of temp.tune_routes: route_key, route (its number, from 0).
-- Columns of the query, one row per attempt, by workflow_id then seq:
--   workflow_id, workflow_name, outcome (its place), outcome_ms
--                        the workflow's, on its first attempt's row only (NULL after)
--   start_us             the attempt's start, epoch microseconds
--   offset_ms, duration_ms, deliverable   as in workflow_steps
--   layer, failure, decision, commit      places in the lists (failure: the error
--                        class, NULL when ok; decision, commit NULL when none)
--   route                its route key's number in temp.tune_routes
--   on_fallback          effective_route = 'fallback'
--   tokens               input plus output tokens
--   cost_pusd            known cost, pico-USD
--   cost_unknown         its cost is unknown (no usage reported, or no price)
CREATE OR REPLACE TEMP TABLE tune_routes AS
SELECT route_key, (row_number() OVER (ORDER BY route_key) - 1)::INTEGER AS route
FROM (SELECT DISTINCT route_key FROM workflow_steps WHERE in_window(first_at, workflow_name));

SELECT CASE WHEN s.seq = 1 THEN s.workflow_id END AS workflow_id,
       CASE WHEN s.seq = 1 THEN s.workflow_name END AS workflow_name,
       CASE WHEN s.seq = 1 THEN (list_position(getvariable('tune_outcomes'), s.outcome) - 1)::INTEGER END AS outcome,
       CASE WHEN s.seq = 1 THEN s.outcome_ms END AS outcome_ms,
       epoch_us(s.first_at) + round(s.offset_ms * 1000)::BIGINT AS start_us,
       s.offset_ms, s.duration_ms, s.deliverable,
       (list_position(getvariable('tune_layers'), s.layer) - 1)::INTEGER AS layer,
       (list_position(getvariable('tune_classes'), s.error_class) - 1)::INTEGER AS failure,
       (list_position(getvariable('tune_decisions'), s.decision) - 1)::INTEGER AS decision,
       (list_position(getvariable('tune_markers'), s.commit_marker) - 1)::INTEGER AS commit,
       r.route, s.effective_route = 'fallback' AS on_fallback,
       (s.input_tokens + s.output_tokens)::BIGINT AS tokens,
       known_cost_pusd(s.cost_kind, s.emitter_cost_pusd, s.input_tokens, s.cached_input_tokens,
                       s.cache_write_input_tokens, s.output_tokens, pr.input_pusd, pr.cached_input_pusd,
                       pr.cache_write_pusd, pr.output_pusd)::DECIMAL(38, 0) AS cost_pusd,
       cost_is_unknown(s.cost_kind, pr.served_model) AS cost_unknown
FROM workflow_steps s
JOIN temp.tune_routes r USING (route_key)
LEFT JOIN temp.prices pr ON pr.served_provider = s.served_provider AND pr.served_model = s.served_model
WHERE in_window(s.first_at, s.workflow_name)
ORDER BY s.workflow_id, s.seq;
