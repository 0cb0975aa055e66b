-- cost_by_served.sql: the cost ledger (docs/record-format.md, "Waste, cost, amplification"), charged to
-- the provider and model that served each attempt, never the one requested.
-- Parameters: none (reads temp.scope_attempts, built by scope.sql).
-- Columns:
--   served_provider
--   served_model          NULL on the provider's subtotal row
--   attempts, wasted_attempts
--   rerouted_attempts     attempts served by another provider than requested
--   input_tokens, output_tokens, cached_input_tokens
--   cost_pusd, wasted_cost_pusd   known cost (pico-USD)
--   unknown_cost_attempts         attempts with no cost_usd and no price entry
SELECT served_provider,
       served_model,
       sum(attempts)::BIGINT AS attempts,
       coalesce(sum(attempts) FILTER (WHERE NOT delivered), 0)::BIGINT AS wasted_attempts,
       coalesce(sum(attempts) FILTER (WHERE served_provider <> provider), 0)::BIGINT AS rerouted_attempts,
       coalesce(sum(input_tokens), 0)::HUGEINT        AS input_tokens,
       coalesce(sum(output_tokens), 0)::HUGEINT       AS output_tokens,
       coalesce(sum(cached_input_tokens), 0)::HUGEINT AS cached_input_tokens,
       coalesce(sum(cost_pusd), 0)::HUGEINT                              AS cost_pusd,
       coalesce(sum(cost_pusd) FILTER (WHERE NOT delivered), 0)::HUGEINT AS wasted_cost_pusd,
       coalesce(sum(unknown_cost_attempts), 0)::BIGINT AS unknown_cost_attempts
FROM temp.scope_attempts
GROUP BY GROUPING SETS ((served_provider), (served_provider, served_model))
ORDER BY served_provider, served_model NULLS FIRST;
