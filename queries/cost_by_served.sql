-- cost_by_served.sql: the cost ledger (docs/record-format.md, "Waste, cost, amplification"), charged to
-- the provider and model that served each attempt, never the one requested.
-- Bounded, whatever names clients send: the 50 served providers that cost the
-- most (then by attempts, then by name) are listed, the rest summed under
-- `other`; of the listed providers' models, the 200 that cost the most are
-- listed, each provider's rest summed under its `other` model. So at most
-- 302 rows, and every total is exact (the folded rows hold what they fold).
-- Parameters: none (reads temp.scope_attempts, built by scope.sql).
-- Columns:
--   served_provider       or `other`
--   served_model          or `other`; NULL on the provider's subtotal row
--   attempts, wasted_attempts
--   rerouted_attempts     attempts served by another provider than requested
--   input_tokens, output_tokens, cached_input_tokens
--   cost_pusd, wasted_cost_pusd   known cost (pico-USD)
--   unknown_cost_attempts         attempts whose cost is unknown (cost.sql's reasons)
--   prices_as_of                  the oldest as-of day (YYYY-MM-DD) of the prices
--                                 that priced the row's attempts (NULL: none was)
WITH served AS (
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
           coalesce(sum(unknown_cost_attempts), 0)::BIGINT AS unknown_cost_attempts,
           min(prices_as_of) AS prices_as_of
    FROM temp.scope_attempts
    GROUP BY ALL
),
provider_rank AS (
    SELECT served_provider,
           row_number() OVER (ORDER BY sum(cost_pusd) DESC, sum(attempts) DESC, served_provider) AS rank
    FROM served
    GROUP BY served_provider
),
ranked AS (
    SELECT s.*, p.rank AS provider_rank,
           row_number() OVER (PARTITION BY p.rank <= 50
                              ORDER BY s.cost_pusd DESC, s.attempts DESC, s.served_provider, s.served_model)
               AS model_rank
    FROM served s JOIN provider_rank p USING (served_provider)
),
folded AS (
    SELECT CASE WHEN provider_rank <= 50 THEN served_provider ELSE 'other' END AS served_provider,
           CASE WHEN provider_rank <= 50 AND model_rank <= 200 THEN served_model ELSE 'other' END AS served_model,
           * EXCLUDE (served_provider, served_model, provider_rank, model_rank)
    FROM ranked
)
SELECT served_provider,
       served_model,
       sum(attempts)::BIGINT AS attempts,
       sum(wasted_attempts)::BIGINT AS wasted_attempts,
       sum(rerouted_attempts)::BIGINT AS rerouted_attempts,
       sum(input_tokens)::HUGEINT AS input_tokens,
       sum(output_tokens)::HUGEINT AS output_tokens,
       sum(cached_input_tokens)::HUGEINT AS cached_input_tokens,
       sum(cost_pusd)::HUGEINT AS cost_pusd,
       sum(wasted_cost_pusd)::HUGEINT AS wasted_cost_pusd,
       sum(unknown_cost_attempts)::BIGINT AS unknown_cost_attempts,
       strftime(min(prices_as_of), '%Y-%m-%d') AS prices_as_of
FROM folded
GROUP BY GROUPING SETS ((served_provider), (served_provider, served_model))
ORDER BY served_provider, served_model NULLS FIRST;
