-- tune_curve.sql: the value of each retry (docs/record-format.md, "Tuning
-- recovery"): for each attempt position k >= 2 of the workflows in the
-- window, how many workflows reached it undelivered, how many it delivered
-- and what it cost; overall, by its layer, by the class of the failure
-- before it and by the workflow's primary route. Then the same for each
-- workflow's first attempt on a fallback route and every attempt after it.
-- Reads the sums of step_rollups.sql like scope.sql reads the report's:
-- total_steps with no time bound, else rollup_steps for the window's whole
-- minutes and temp.r_steps for its edges (a workflow with one attempt has
-- no position 2 and no fallback; attempts after a workflow's delivery are
-- not counted, since nothing a policy stops after it changes the outcome).
--
-- Parameters: the scope_* variables and the in_whole_minutes macro of
--   window.sql; temp.r_steps (step_rollups.sql over
--   temp.rollup_steps_source, the window's edges); temp.prices and the
--   macros of cost.sql.
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
-- The sums grouped first (a few thousand rows), then priced by served
-- model, then summed by each breakdown.
CREATE OR REPLACE TEMP TABLE tune_grouped AS
WITH grouped AS (
    SELECT position, and_later, layer, after_class, primary_route, first_fallback, from_fallback,
           fallback_layer, fallback_class, served_provider, served_model, cost_kind, price_key, priced_kinds,
           sum(reached)::BIGINT AS reached, sum(delivered)::BIGINT AS delivered, sum(attempts)::BIGINT AS attempts,
           sum(input_tokens)::HUGEINT AS input_tokens, sum(cached_input_tokens)::HUGEINT AS cached_input_tokens,
           sum(cache_write_input_tokens)::HUGEINT AS cache_write_input_tokens,
           sum(cache_write_1h_input_tokens)::HUGEINT AS cache_write_1h_input_tokens,
           sum(output_tokens)::HUGEINT AS output_tokens,
           sum(reasoning_output_tokens)::HUGEINT AS reasoning_output_tokens,
           sum(web_search_requests)::HUGEINT AS web_search_requests,
           sum(emitter_cost_pusd)::HUGEINT AS emitter_cost_pusd,
           sum(added_us)::HUGEINT AS added_us, sum(added_to_outcome_us)::HUGEINT AS added_to_outcome_us
    FROM (
        SELECT t.* FROM total_steps t
        WHERE getvariable('scope_everything')
          AND (getvariable('scope_workflow') IS NULL OR t.workflow_name = getvariable('scope_workflow'))
        UNION ALL BY NAME
        SELECT r.* EXCLUDE (minute) FROM rollup_steps r
        WHERE NOT getvariable('scope_everything') AND in_whole_minutes(r.minute, r.workflow_name)
        UNION ALL BY NAME
        SELECT e.* EXCLUDE (minute) FROM temp.r_steps e
    )
    GROUP BY ALL
)
SELECT g.* EXCLUDE (price, unpriced, priced), (g.input_tokens + g.output_tokens)::HUGEINT AS tokens,
       known_cost_of(g.cost_kind, g.emitter_cost_pusd, g.priced) AS cost_pusd,
       CASE WHEN unknown_reason_of(g.cost_kind, g.price, g.unpriced, g.priced) IS NOT NULL THEN g.attempts ELSE 0 END
           AS unknown_cost_attempts
-- Priced once: the cost and why it is unknown both read `priced`.
FROM priced_rows(grouped) g;

CREATE OR REPLACE TEMP TABLE tune_curve AS
WITH routes AS (
    SELECT primary_route, row_number() OVER (ORDER BY sum(reached) DESC, primary_route) <= 20 AS kept
    FROM temp.tune_grouped WHERE position = 2 GROUP BY primary_route
),
grouped AS (
    SELECT g.* REPLACE (CASE WHEN r.kept THEN g.primary_route ELSE 'other' END AS primary_route)
    FROM temp.tune_grouped g LEFT JOIN routes r USING (primary_route)
),
retry_rows AS (
    SELECT 'retry' AS step, position, and_later, coalesce(layer, 'all') AS layer,
           coalesce(after_class, 'all') AS after_class, coalesce(primary_route, 'all') AS primary_route,
           sum(reached)::BIGINT AS undelivered_before, sum(delivered)::BIGINT AS delivered,
           sum(attempts)::BIGINT AS attempts, sum(tokens)::HUGEINT AS tokens, sum(cost_pusd)::HUGEINT AS cost_pusd,
           sum(unknown_cost_attempts)::BIGINT AS unknown_cost_attempts, sum(added_us) / 1000.0 AS elapsed_ms
    FROM grouped
    GROUP BY GROUPING SETS ((position, and_later), (position, and_later, layer),
                            (position, and_later, after_class), (position, and_later, primary_route))
),
fallback_rows AS (
    SELECT 'first_fallback' AS step, NULL::BIGINT AS position, false AS and_later,
           coalesce(fallback_layer, 'all') AS layer, coalesce(fallback_class, 'all') AS after_class,
           coalesce(primary_route, 'all') AS primary_route,
           coalesce(sum(attempts) FILTER (WHERE first_fallback), 0)::BIGINT AS undelivered_before,
           sum(delivered)::BIGINT AS delivered,
           sum(attempts)::BIGINT AS attempts, sum(tokens)::HUGEINT AS tokens, sum(cost_pusd)::HUGEINT AS cost_pusd,
           sum(unknown_cost_attempts)::BIGINT AS unknown_cost_attempts,
           sum(added_to_outcome_us) / 1000.0 AS elapsed_ms
    FROM grouped
    WHERE from_fallback
    GROUP BY GROUPING SETS ((), (fallback_layer), (fallback_class), (primary_route))
    HAVING count(*) > 0
)
SELECT * FROM retry_rows UNION ALL SELECT * FROM fallback_rows;
DROP TABLE temp.tune_grouped;
