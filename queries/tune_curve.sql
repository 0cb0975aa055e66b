-- tune_curve.sql: the value of each retry (docs/record-format.md, "Tuning
-- recovery"): for each attempt position k >= 2 of the workflows in the
-- window, how many workflows reached it undelivered, how many it delivered
-- and what it cost; overall, by its layer, by the class of the failure
-- before it and by the workflow's primary route. Then the same for each
-- workflow's first attempt on a fallback route and every attempt after it.
-- Reads workflow_steps (one row per attempt of the workflows with more than
-- one: a workflow with one attempt has no position 2 and no fallback).
-- Attempts after a workflow's delivery are not counted: nothing a policy
-- stops before them can change the outcome.
--
-- Parameters: the scope_* variables and the in_window macro of window.sql;
--   temp.prices and the macros of cost.sql.
-- Not a single query: it builds temp.tune_curve, which the store reads (by
-- step DESC, position, then each row summing 'all' before the rows it sums).
-- Columns of temp.tune_curve, one row per (step, position, layer,
-- after_class, primary_route) with attempts; 'all' where the row sums every
-- value of that column:
--   step                 retry | first_fallback
--   position             k (retry rows; 16 stands for 16 and later); NULL for first_fallback
--   and_later            the row sums positions 16 and later
--   layer                the attempt's layer
--   after_class          error class of the attempt before ('none': it did not fail)
--   primary_route        the workflow's primary route key (the 20 with most
--                        retried workflows; the rest 'other')
--   undelivered_before   workflows that reached the position (the fallback) undelivered
--   delivered            of those, delivered by an attempt of the row (retry rows:
--                        the attempt at k; first_fallback: the fallback or one after it)
--   attempts             attempts of the row
--   tokens               their input plus output tokens
--   cost_pusd            their known cost, pico-USD
--   unknown_cost_attempts
--   elapsed_ms           time they added to time to outcome: retry rows, from the latest
--                        end of the attempts before to the attempt's end; first_fallback,
--                        from there to the workflow's outcome (never negative)
CREATE OR REPLACE TEMP TABLE tune_scoped AS
SELECT s.workflow_id, s.seq, least(s.seq, 16) AS position, s.seq >= 16 AS and_later, s.layer, s.after_class,
       s.primary_route, s.first_fallback, s.deliverable AND s.seq = s.delivered_seq AS delivers,
       -- Whole microseconds, so that sums do not depend on row order.
       round(greatest(s.offset_ms + s.duration_ms - s.end_before_ms, 0) * 1000)::BIGINT AS added_us,
       round(greatest(s.outcome_ms - s.end_before_ms, 0) * 1000)::BIGINT AS added_to_outcome_us,
       (s.input_tokens + s.output_tokens)::HUGEINT AS tokens,
       known_cost_pusd(s.cost_kind, s.emitter_cost_pusd, s.input_tokens, s.cached_input_tokens,
                       s.cache_write_input_tokens, s.output_tokens, pr.input_pusd, pr.cached_input_pusd,
                       pr.cache_write_pusd, pr.output_pusd) AS cost_pusd,
       cost_is_unknown(s.cost_kind, pr.served_model) AS cost_unknown
FROM workflow_steps s
LEFT JOIN temp.prices pr ON pr.served_provider = s.served_provider AND pr.served_model = s.served_model
WHERE in_window(s.first_at, s.workflow_name)
  AND s.seq > 1 AND (s.delivered_seq IS NULL OR s.seq <= s.delivered_seq);

CREATE OR REPLACE TEMP TABLE tune_curve AS
WITH routes AS (
    SELECT primary_route, row_number() OVER (ORDER BY count(*) DESC, primary_route) <= 20 AS kept
    FROM temp.tune_scoped WHERE seq = 2 GROUP BY primary_route
),
scoped AS (
    SELECT s.* REPLACE (CASE WHEN r.kept THEN s.primary_route ELSE 'other' END AS primary_route)
    FROM temp.tune_scoped s LEFT JOIN routes r USING (primary_route)
),
fallback_from AS (
    SELECT workflow_id, seq AS from_seq, layer AS from_layer, after_class AS from_class,
           added_to_outcome_us
    FROM scoped WHERE first_fallback
),
retry_rows AS (
    SELECT 'retry' AS step, position, and_later, coalesce(layer, 'all') AS layer,
           coalesce(after_class, 'all') AS after_class, coalesce(primary_route, 'all') AS primary_route,
           count(*) FILTER (WHERE seq = position) AS undelivered_before,
           count(*) FILTER (WHERE delivers) AS delivered,
           count(*) AS attempts, coalesce(sum(tokens), 0)::HUGEINT AS tokens, coalesce(sum(cost_pusd), 0)::HUGEINT AS cost_pusd,
           count(*) FILTER (WHERE cost_unknown) AS unknown_cost_attempts, coalesce(sum(added_us), 0) / 1000.0 AS elapsed_ms
    FROM scoped
    GROUP BY GROUPING SETS ((position, and_later), (position, and_later, layer),
                            (position, and_later, after_class), (position, and_later, primary_route))
    HAVING count(*) > 0
),
fallback_rows AS (
    SELECT 'first_fallback' AS step, NULL::BIGINT AS position, false AS and_later,
           coalesce(f.from_layer, 'all') AS layer, coalesce(f.from_class, 'all') AS after_class,
           coalesce(s.primary_route, 'all') AS primary_route,
           count(*) FILTER (WHERE s.seq = f.from_seq) AS undelivered_before,
           count(*) FILTER (WHERE s.delivers) AS delivered,
           count(*) AS attempts, coalesce(sum(s.tokens), 0)::HUGEINT AS tokens, coalesce(sum(s.cost_pusd), 0)::HUGEINT AS cost_pusd,
           count(*) FILTER (WHERE s.cost_unknown) AS unknown_cost_attempts,
           coalesce(sum(CASE WHEN s.seq = f.from_seq THEN f.added_to_outcome_us END), 0) / 1000.0 AS elapsed_ms
    FROM scoped s JOIN fallback_from f ON s.workflow_id = f.workflow_id AND s.seq >= f.from_seq
    GROUP BY GROUPING SETS ((), (f.from_layer), (f.from_class), (s.primary_route))
    HAVING count(*) > 0
)
SELECT * FROM retry_rows UNION ALL SELECT * FROM fallback_rows;
DROP TABLE temp.tune_scoped;
