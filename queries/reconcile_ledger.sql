-- reconcile_ledger.sql: the ledger's side of the bill (docs/reconcile.md),
-- per cell at its finest: billing provider, cell start, account, model and
-- tier. Read from the stored attempts: a cell is by attempt start and
-- billing account, which no rollup keeps.
-- Parameters: the variables reconcile_since, reconcile_until (TIMESTAMP)
--   and reconcile_grain ('day' | 'hour'); temp.reconcile_models (provider,
--   model, cell_model: the name a cell gives a model); temp.prices (every
--   attempt's price key priced: store::bill); cost.sql's macros.
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
WITH scoped AS (
    SELECT CASE WHEN a.provider = 'openrouter' THEN a.provider ELSE a.served_provider END AS billing_provider,
           -- OpenRouter bills the slug it was asked for, whoever served it.
           CASE WHEN a.provider = 'openrouter' THEN a.model ELSE a.served_model END AS billed_model,
           date_trunc(getvariable('reconcile_grain'), a.started_at) AS cell_start,
           a.billing_account, CASE WHEN a.batch THEN 'batch' ELSE a.service_tier END AS service_tier,
           a.served_provider, a.served_model, a.status, a.cost_pusd,
           price_key_of(a.started_at, a.batch, a.service_tier, a.input_tokens, a.billing_account) AS price_key,
           -- The report's rule (facts.sql): what each attempt is charged.
           cost_kind_of(a.cost_pusd, a.cost_currency, a.status, a.input_tokens, a.output_tokens,
                        a.cached_input_tokens, a.cache_write_input_tokens, a.web_search_requests) AS cost_kind,
           coalesce(a.input_tokens, 0) AS input_tokens,
           coalesce(a.cached_input_tokens, 0) AS cached_input_tokens,
           coalesce(a.cache_write_input_tokens, 0) AS cache_write_input_tokens,
           coalesce(a.cache_write_1h_input_tokens, 0) AS cache_write_1h_input_tokens,
           coalesce(a.output_tokens, 0) AS output_tokens,
           coalesce(a.reasoning_output_tokens, 0) AS reasoning_output_tokens,
           coalesce(a.web_search_requests, 0) AS web_search_requests,
           a.input_tokens IS NULL AND a.output_tokens IS NULL AND a.cached_input_tokens IS NULL
               AND a.cache_write_input_tokens IS NULL AS no_usage,
           a.status = 'error' AND coalesce(a.output_tokens, 0) = 0 AS unbilled
    FROM attempts a
    WHERE a.started_at >= getvariable('reconcile_since') AND a.started_at < getvariable('reconcile_until')
      AND a.workflow_id NOT IN (SELECT workflow_id FROM quarantine)
),
costed AS (
    SELECT s.*, coalesce(named.cell_model, s.billed_model) AS cell_model,
           known_cost_pusd(s.cost_kind, s.cost_pusd, s.input_tokens, s.cached_input_tokens,
                           s.cache_write_input_tokens, s.cache_write_1h_input_tokens, s.output_tokens,
                           s.reasoning_output_tokens, s.web_search_requests, p.price) AS known_pusd,
           unknown_cost_reason(s.cost_kind, s.input_tokens, s.cached_input_tokens, s.cache_write_input_tokens,
                               s.cache_write_1h_input_tokens, s.output_tokens, s.reasoning_output_tokens,
                               s.web_search_requests, p.price, p.unpriced) IS NOT NULL AS cost_unknown,
           priced_pusd(s.input_tokens, s.cached_input_tokens, s.cache_write_input_tokens,
                       s.cache_write_1h_input_tokens, s.output_tokens, s.reasoning_output_tokens, 0, p.price)
               AS repriced
    FROM scoped s
    LEFT JOIN temp.reconcile_models named ON named.provider = s.billing_provider AND named.model = s.billed_model
    LEFT JOIN temp.prices p
      ON p.served_provider = s.served_provider AND p.served_model = s.served_model
     AND p.price_key IS NOT DISTINCT FROM s.price_key
),
marked AS (
    SELECT *, NOT unbilled AND (no_usage OR repriced IS NULL) AS unrepriced FROM costed
)
SELECT billing_provider AS provider, cell_start, billing_account, cell_model AS model, service_tier,
       count(*)::BIGINT AS attempts,
       count(*) FILTER (WHERE NOT unbilled)::BIGINT AS billable_attempts,
       count(*) FILTER (WHERE unbilled)::BIGINT AS unbilled_failures,
       coalesce(sum(input_tokens) FILTER (WHERE NOT unbilled), 0)::HUGEINT AS input_tokens,
       coalesce(sum(cached_input_tokens) FILTER (WHERE NOT unbilled), 0)::HUGEINT AS cached_input_tokens,
       coalesce(sum(cache_write_input_tokens) FILTER (WHERE NOT unbilled), 0)::HUGEINT AS cache_write_input_tokens,
       coalesce(sum(output_tokens) FILTER (WHERE NOT unbilled), 0)::HUGEINT AS output_tokens,
       coalesce(sum(known_pusd), 0)::HUGEINT AS cost_pusd,
       count(*) FILTER (WHERE cost_unknown)::BIGINT AS unknown_cost_attempts,
       coalesce(sum(known_pusd) FILTER (WHERE unbilled), 0)::HUGEINT AS unbilled_cost_pusd,
       coalesce(sum(repriced) FILTER (WHERE NOT unbilled AND NOT unrepriced), 0)::HUGEINT AS repriced_pusd,
       count(*) FILTER (WHERE unrepriced)::BIGINT AS unrepriced_attempts
FROM marked
GROUP BY ALL;
