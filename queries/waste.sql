-- waste.sql: attempts, tokens and cost, total and wasted (docs/record-format.md,
-- "Waste, cost, amplification": every attempt that is not its workflow's delivered attempt is wasted).
-- Parameters: none (reads temp.scope).
-- Columns (one row):
--   attempts, wasted_attempts
--   input_tokens, output_tokens, cached_input_tokens, cache_write_input_tokens   all attempts
--   wasted_input_tokens, wasted_output_tokens, wasted_cached_input_tokens,
--   wasted_cache_write_input_tokens
--   cost_pusd, wasted_cost_pusd     known cost (pico-USD)
--   unknown_cost_attempts, wasted_unknown_cost_attempts  attempts whose cost is unknown
SELECT count(*) AS attempts,
       count(*) FILTER (WHERE NOT delivered) AS wasted_attempts,
       coalesce(sum(input_tokens), 0)::HUGEINT        AS input_tokens,
       coalesce(sum(output_tokens), 0)::HUGEINT       AS output_tokens,
       coalesce(sum(cached_input_tokens), 0)::HUGEINT AS cached_input_tokens,
       coalesce(sum(cache_write_input_tokens), 0)::HUGEINT AS cache_write_input_tokens,
       coalesce(sum(input_tokens) FILTER (WHERE NOT delivered), 0)::HUGEINT        AS wasted_input_tokens,
       coalesce(sum(output_tokens) FILTER (WHERE NOT delivered), 0)::HUGEINT       AS wasted_output_tokens,
       coalesce(sum(cached_input_tokens) FILTER (WHERE NOT delivered), 0)::HUGEINT AS wasted_cached_input_tokens,
       coalesce(sum(cache_write_input_tokens) FILTER (WHERE NOT delivered), 0)::HUGEINT
           AS wasted_cache_write_input_tokens,
       coalesce(sum(cost_pusd_eff), 0)::HUGEINT                              AS cost_pusd,
       coalesce(sum(cost_pusd_eff) FILTER (WHERE NOT delivered), 0)::HUGEINT AS wasted_cost_pusd,
       count(*) FILTER (WHERE cost_pusd_eff IS NULL)                     AS unknown_cost_attempts,
       count(*) FILTER (WHERE cost_pusd_eff IS NULL AND NOT delivered)   AS wasted_unknown_cost_attempts
FROM temp.scope;
