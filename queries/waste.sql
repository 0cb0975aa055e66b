-- waste.sql: attempts, tokens and cost, total and wasted (docs/record-format.md,
-- "Waste, cost, amplification": every attempt that is not its workflow's delivered attempt is wasted).
-- Parameters: none (reads temp.scope_attempts, built by scope.sql).
-- Columns (one row):
--   attempts, wasted_attempts
--   input_tokens, output_tokens, cached_input_tokens, cache_write_input_tokens   all attempts
--   wasted_input_tokens, wasted_output_tokens, wasted_cached_input_tokens,
--   wasted_cache_write_input_tokens
--   reasoning_output_tokens, wasted_reasoning_output_tokens  the reasoning part of output
--   cost_pusd, wasted_cost_pusd     known cost (pico-USD)
--   unknown_cost_attempts, wasted_unknown_cost_attempts  attempts whose cost is unknown
--   no_usage, other_currency, no_price, no_tier_price, no_kind_price
--                                   the unknown-cost attempts by reason (they sum
--                                   to unknown_cost_attempts)
--   region_unpriced_attempts        attempts priced by an entry matched only
--                                   once their served model's region was dropped
--   cache_write_1h_input_tokens, wasted_cache_write_1h_input_tokens, web_search_requests,
--   wasted_web_search_requests      the one-hour part of the cache writes, and
--                                   searches
SELECT coalesce(sum(attempts), 0)::BIGINT AS attempts,
       coalesce(sum(attempts) FILTER (WHERE NOT delivered), 0)::BIGINT AS wasted_attempts,
       coalesce(sum(input_tokens), 0)::HUGEINT        AS input_tokens,
       coalesce(sum(output_tokens), 0)::HUGEINT       AS output_tokens,
       coalesce(sum(cached_input_tokens), 0)::HUGEINT AS cached_input_tokens,
       coalesce(sum(cache_write_input_tokens), 0)::HUGEINT AS cache_write_input_tokens,
       coalesce(sum(input_tokens) FILTER (WHERE NOT delivered), 0)::HUGEINT        AS wasted_input_tokens,
       coalesce(sum(output_tokens) FILTER (WHERE NOT delivered), 0)::HUGEINT       AS wasted_output_tokens,
       coalesce(sum(cached_input_tokens) FILTER (WHERE NOT delivered), 0)::HUGEINT AS wasted_cached_input_tokens,
       coalesce(sum(cache_write_input_tokens) FILTER (WHERE NOT delivered), 0)::HUGEINT
           AS wasted_cache_write_input_tokens,
       coalesce(sum(reasoning_output_tokens), 0)::HUGEINT AS reasoning_output_tokens,
       coalesce(sum(reasoning_output_tokens) FILTER (WHERE NOT delivered), 0)::HUGEINT
           AS wasted_reasoning_output_tokens,
       coalesce(sum(cost_pusd), 0)::HUGEINT                              AS cost_pusd,
       coalesce(sum(cost_pusd) FILTER (WHERE NOT delivered), 0)::HUGEINT AS wasted_cost_pusd,
       coalesce(sum(unknown_cost_attempts), 0)::BIGINT                       AS unknown_cost_attempts,
       coalesce(sum(unknown_cost_attempts) FILTER (WHERE NOT delivered), 0)::BIGINT AS wasted_unknown_cost_attempts,
       coalesce(sum(attempts) FILTER (WHERE unknown_reason = 'no_usage'), 0)::BIGINT AS no_usage,
       coalesce(sum(attempts) FILTER (WHERE unknown_reason = 'other_currency'), 0)::BIGINT AS other_currency,
       coalesce(sum(attempts) FILTER (WHERE unknown_reason = 'no_price'), 0)::BIGINT AS no_price,
       coalesce(sum(attempts) FILTER (WHERE unknown_reason = 'no_tier_price'), 0)::BIGINT AS no_tier_price,
       coalesce(sum(attempts) FILTER (WHERE unknown_reason = 'no_kind_price'), 0)::BIGINT AS no_kind_price,
       coalesce(sum(region_unpriced_attempts), 0)::BIGINT AS region_unpriced_attempts,
       coalesce(sum(cache_write_1h_input_tokens), 0)::HUGEINT AS cache_write_1h_input_tokens,
       coalesce(sum(cache_write_1h_input_tokens) FILTER (WHERE NOT delivered), 0)::HUGEINT
           AS wasted_cache_write_1h_input_tokens,
       coalesce(sum(web_search_requests), 0)::HUGEINT AS web_search_requests,
       coalesce(sum(web_search_requests) FILTER (WHERE NOT delivered), 0)::HUGEINT AS wasted_web_search_requests
FROM temp.scope_attempts;
