-- reconcile_ledger.sql: the ledger's side of the bill (docs/reconcile.md),
-- per cell at its finest: billing provider, cell start, account, model and
-- tier. Read from the stored attempts (a cell is by attempt start and
-- billing account, which no rollup keeps), summed by reconcile_groups.sql
-- and priced a group at a time.
-- Parameters: temp.reconcile_groups (reconcile_groups.sql);
--   temp.reconcile_models (provider, model, cell_model: the name a cell
--   gives a model); temp.prices (every group's price key priced:
--   store::bill); cost.sql's macros.
-- Columns: provider (who bills: `openrouter` for its routes, else the
--   served provider), cell_start, billing_account, model (as the price
--   table names it; for OpenRouter the slug asked for), service_tier (a
--   batch attempt's is `batch`), attempts, billable_attempts,
--   unbilled_failures (failed, no output tokens), the billable attempts'
--   input_tokens, cached_input_tokens, cache_write_input_tokens,
--   output_tokens, cost_pusd (known cost, as the report charges it),
--   unknown_cost_attempts, unbilled_cost_pusd, repriced_pusd (billable
--   tokens priced by the table: their tokens only, web searches apart as
--   the provider's token costs are), unrepriced_attempts.
WITH priced AS (
    SELECT g.*, coalesce(named.cell_model, g.billed_model) AS cell_model,
           -- The provider's token costs: web searches are billed apart.
           priced_pusd(g.input_tokens, g.cached_input_tokens, g.cache_write_input_tokens,
                       g.cache_write_1h_input_tokens, g.output_tokens, g.reasoning_output_tokens, 0, g.price)
               AS repriced
    FROM priced_rows(reconcile_groups) g
    LEFT JOIN temp.reconcile_models named ON named.provider = g.billing_provider AND named.model = g.billed_model
),
marked AS (
    SELECT *, known_cost_of(cost_kind, emitter_pusd, priced) AS known_pusd,
           unknown_reason_of(cost_kind, price, unpriced, priced) IS NOT NULL AS cost_unknown,
           NOT unbilled AND (no_usage OR repriced IS NULL) AS unrepriced
    FROM priced
)
SELECT billing_provider AS provider, cell_start, billing_account, cell_model AS model, service_tier,
       sum(attempts)::BIGINT AS attempts,
       coalesce(sum(attempts) FILTER (WHERE NOT unbilled), 0)::BIGINT AS billable_attempts,
       coalesce(sum(attempts) FILTER (WHERE unbilled), 0)::BIGINT AS unbilled_failures,
       coalesce(sum(input_tokens) FILTER (WHERE NOT unbilled), 0)::HUGEINT AS input_tokens,
       coalesce(sum(cached_input_tokens) FILTER (WHERE NOT unbilled), 0)::HUGEINT AS cached_input_tokens,
       coalesce(sum(cache_write_input_tokens) FILTER (WHERE NOT unbilled), 0)::HUGEINT AS cache_write_input_tokens,
       coalesce(sum(output_tokens) FILTER (WHERE NOT unbilled), 0)::HUGEINT AS output_tokens,
       coalesce(sum(known_pusd), 0)::HUGEINT AS cost_pusd,
       coalesce(sum(attempts) FILTER (WHERE cost_unknown), 0)::BIGINT AS unknown_cost_attempts,
       coalesce(sum(known_pusd) FILTER (WHERE unbilled), 0)::HUGEINT AS unbilled_cost_pusd,
       coalesce(sum(repriced) FILTER (WHERE NOT unbilled AND NOT unrepriced), 0)::HUGEINT AS repriced_pusd,
       coalesce(sum(attempts) FILTER (WHERE unrepriced), 0)::BIGINT AS unrepriced_attempts
FROM marked
GROUP BY ALL;
