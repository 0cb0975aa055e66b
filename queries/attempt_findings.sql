-- attempt_findings.sql: findings of kind `attempt` (every attempt of a
-- workflow with more than one: what a policy's attempt, time and extra-cost
-- budgets are checked against) read from the steps, which hold exactly
-- those attempts, rather than stored a second time beside the other kinds.
-- Not a report itself: it defines the table macro attempt_findings(steps).
-- Parameters: steps, the name of a view shaped like workflow_steps
--   (migrations/0015_steps.sql) plus sign BIGINT, as the rollup scripts'
--   signed sources are.
-- Columns: sign, then those of workflow_findings (migrations/0007_findings.sql) with
--   kind = 'attempt', class delivered | wasted, attempts = 1, plus seq,
--   offset_ms (the attempt's start after the first attempt's) and
--   prev_offset_ms (the latest offset_ms of the attempts before it; NULL for
--   the first).
CREATE OR REPLACE TEMP MACRO attempt_findings(steps) AS TABLE
SELECT sign, workflow_id, first_at, workflow_name, 'attempt' AS kind,
       CASE WHEN seq = delivered_seq THEN 'delivered' ELSE 'wasted' END AS class, layer, served_provider,
       served_model, cost_kind, price_key, priced_kinds, seq, offset_ms, prev_offset_ms, 1::BIGINT AS attempts,
       input_tokens, output_tokens, cached_input_tokens, cache_write_input_tokens, emitter_cost_pusd,
       reasoning_output_tokens, cache_write_1h_input_tokens, web_search_requests
FROM query_table(steps);
