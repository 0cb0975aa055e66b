-- cost_by_served.sql: the cost ledger (docs/record-format.md, "Waste, cost, amplification"), charged to
-- the provider and model that served each attempt, never the one requested.
-- Parameters: none (reads temp.scope).
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
       count(*) AS attempts,
       count(*) FILTER (WHERE NOT delivered) AS wasted_attempts,
       count(*) FILTER (WHERE served_provider <> provider) AS rerouted_attempts,
       coalesce(sum(input_tokens), 0)::HUGEINT        AS input_tokens,
       coalesce(sum(output_tokens), 0)::HUGEINT       AS output_tokens,
       coalesce(sum(cached_input_tokens), 0)::HUGEINT AS cached_input_tokens,
       coalesce(sum(cost_pusd_eff), 0)::HUGEINT                              AS cost_pusd,
       coalesce(sum(cost_pusd_eff) FILTER (WHERE NOT delivered), 0)::HUGEINT AS wasted_cost_pusd,
       count(*) FILTER (WHERE cost_pusd_eff IS NULL) AS unknown_cost_attempts
FROM temp.scope
GROUP BY GROUPING SETS ((served_provider), (served_provider, served_model))
ORDER BY served_provider, served_model NULLS FIRST;
