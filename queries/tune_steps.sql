-- tune_steps.sql: what a replay reads (docs/record-format.md, "Tuning
-- recovery"): every attempt of the window's workflows with more than one
-- (of those a replay by shape leaves apart: tune_apart), priced, each
-- workflow's attempts together and in order. The replay's
-- limits are applied to these rows by attempt_core::replay, one attempt at
-- a time: each rule there is a decision about the next attempt given the
-- ones kept before it, which SQL would state as a recursion over
-- positions. Enums travel as their place in the lists the reader sets (read
-- as numbers, a million rows cost a fifth of what their names did).
--
-- Parameters: the scope_* variables and the in_window macro of window.sql;
--   the macro tune_apart(shape_key) (store::tune: true, or not among the
--   shapes a replay by shape read, temp.tune_plans);
--   temp.prices and the macros of cost.sql; the variables tune_layers,
--   tune_classes, tune_decisions, tune_markers and tune_outcomes (VARCHAR[]:
--   each enum's names in the reader's order).
-- Not a single query: it builds temp.tune_routes, the variables
--   tune_route_keys, tune_price_keys and tune_price_values, and the view
--   temp.tune_step_rows, which the reader reads.
-- No join: workflow_steps is stored by first_at, workflow_id and seq
--   (store::derived), and DuckDB scans, filters and projects in stored
--   order, while a join may interleave workflows. Routes and prices are
--   looked up in lists instead. The reader checks that each workflow's
--   rows come together and in order (workflow_key and seq), and orders
--   by sort_id and seq when they do not (a file written before that order).
-- Columns of temp.tune_routes: route_key, route (its number, from 0).
-- Columns of the view temp.tune_step_rows, one row per attempt:
--   workflow_key         hash of the workflow id (the order check)
--   sort_id              the workflow id (to order by; not read otherwise)
--   seq                  the attempt's position, from 1
--   workflow_id, workflow_name, outcome (its place), outcome_ms, attempts
--                        the workflow's, on its first attempt's row only (NULL after)
--   start_us             the attempt's start, epoch microseconds
--   offset_ms, duration_ms, deliverable   as in workflow_steps
--   layer, failure, decision, commit      places in the lists (failure: the error
--                        class, NULL when ok; decision, commit NULL when none)
--   route                its route key's number in temp.tune_routes
--   on_fallback          effective_route = 'fallback'
--   tokens               input plus output tokens
--   cost_pusd            known cost, pico-USD
--   cost_unknown         its cost is unknown (cost.sql's unknown_cost_reason)
CREATE OR REPLACE TEMP TABLE tune_routes AS
SELECT route_key, (row_number() OVER (ORDER BY route_key) - 1)::INTEGER AS route
FROM (SELECT DISTINCT route_key FROM workflow_steps
      WHERE in_window(first_at, workflow_name) AND tune_apart(shape_key));
SET VARIABLE tune_route_keys = (SELECT list(route_key ORDER BY route) FROM temp.tune_routes);
-- Only the price keys of the window's steps: each row looks its key up in
-- the list.
CREATE OR REPLACE TEMP TABLE tune_price_list AS
SELECT row_number() OVER (ORDER BY p.served_provider, p.served_model, p.price_key) AS place,
       {provider: p.served_provider, model: p.served_model, key: p.price_key} AS lookup,
       p.price, p.unpriced
FROM temp.prices p
SEMI JOIN (SELECT DISTINCT served_provider, served_model, price_key FROM workflow_steps
           WHERE in_window(first_at, workflow_name) AND tune_apart(shape_key)) k
  ON k.served_provider = p.served_provider AND k.served_model = p.served_model
 AND k.price_key IS NOT DISTINCT FROM p.price_key;
SET VARIABLE tune_price_keys = (SELECT coalesce(list(lookup ORDER BY place), []) FROM temp.tune_price_list);
SET VARIABLE tune_price_values = (
    SELECT coalesce(list({price: price, unpriced: unpriced} ORDER BY place), []) FROM temp.tune_price_list);
DROP TABLE temp.tune_price_list;

CREATE OR REPLACE TEMP VIEW tune_step_rows AS
WITH keyed AS (
    SELECT *, getvariable('tune_price_values')[
                  list_position(getvariable('tune_price_keys'),
                                {provider: served_provider, model: served_model, key: price_key})] AS looked_up
    FROM workflow_steps
    WHERE in_window(first_at, workflow_name) AND tune_apart(shape_key)
),
s AS (
    -- Priced once: the cost and why it is unknown both read `priced`.
    SELECT *, looked_up.price AS price, looked_up.unpriced AS unpriced,
           priced_tokens(keyed, looked_up.price) AS priced
    FROM keyed
)
SELECT hash(s.workflow_id) AS workflow_key, s.workflow_id AS sort_id, s.seq,
       CASE WHEN s.seq = 1 THEN s.workflow_id END AS workflow_id,
       CASE WHEN s.seq = 1 THEN s.workflow_name END AS workflow_name,
       CASE WHEN s.seq = 1 THEN (list_position(getvariable('tune_outcomes'), s.outcome) - 1)::INTEGER END AS outcome,
       CASE WHEN s.seq = 1 THEN s.outcome_ms END AS outcome_ms,
       CASE WHEN s.seq = 1 THEN s.attempts END AS attempts,
       epoch_us(s.first_at) + round(s.offset_ms * 1000)::BIGINT AS start_us,
       s.offset_ms, s.duration_ms, s.deliverable,
       (list_position(getvariable('tune_layers'), s.layer) - 1)::INTEGER AS layer,
       (list_position(getvariable('tune_classes'), s.error_class) - 1)::INTEGER AS failure,
       (list_position(getvariable('tune_decisions'), s.decision) - 1)::INTEGER AS decision,
       (list_position(getvariable('tune_markers'), s.commit_marker) - 1)::INTEGER AS commit,
       (list_position(getvariable('tune_route_keys'), s.route_key) - 1)::INTEGER AS route,
       s.effective_route = 'fallback' AS on_fallback,
       (s.input_tokens + s.output_tokens)::BIGINT AS tokens,
       known_cost_of(s.cost_kind, s.emitter_cost_pusd, s.priced)::DECIMAL(38, 0) AS cost_pusd,
       unknown_reason_of(s.cost_kind, s.price, s.unpriced, s.priced) IS NOT NULL AS cost_unknown
FROM s;
