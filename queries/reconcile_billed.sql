-- reconcile_billed.sql: the provider's side of the bill (docs/reconcile.md),
-- the imported facts summed per source and cell at their finest.
-- Parameters: the variables reconcile_cells_from, reconcile_cells_until
--   (TIMESTAMP, whole cells) and reconcile_grain; temp.reconcile_models
--   (the name a cell gives a model); temp.prices (every usage fact's price
--   key priced: the bucket's day, the tier, the prompt size its context
--   window starts at, the account: store::bill); cost.sql's macros.
-- Columns: source, provider, cell_start, kind (usage | token_cost |
--   other_cost), billing_account, model (as the price table names it),
--   service_tier, currency, detail (other costs only), facts, requests
--   (NULL when no fact counts them), input_tokens, cached_input_tokens,
--   cache_write_input_tokens, output_tokens, amount_pico, tokens_priced_pusd
--   (usage priced by the table) and unpriced_facts (usage the table has no
--   price for).
SELECT f.source, f.provider, date_trunc(getvariable('reconcile_grain'), f.bucket_start) AS cell_start, f.kind,
       f.billing_account, coalesce(m.cell_model, f.model) AS model, f.service_tier, f.currency,
       CASE WHEN f.kind = 'other_cost' THEN f.detail END AS detail,
       count(*)::BIGINT AS facts,
       sum(f.requests)::BIGINT AS requests,
       coalesce(sum(f.input_tokens), 0)::HUGEINT AS input_tokens,
       coalesce(sum(f.cached_input_tokens), 0)::HUGEINT AS cached_input_tokens,
       coalesce(sum(f.cache_write_input_tokens), 0)::HUGEINT AS cache_write_input_tokens,
       coalesce(sum(f.output_tokens), 0)::HUGEINT AS output_tokens,
       coalesce(sum(f.amount_pico), 0)::HUGEINT AS amount_pico,
       coalesce(sum(priced) FILTER (WHERE f.kind = 'usage'), 0)::HUGEINT AS tokens_priced_pusd,
       count(*) FILTER (WHERE f.kind = 'usage' AND priced IS NULL)::BIGINT AS unpriced_facts
FROM (
    SELECT f.*,
           priced_pusd(coalesce(f.input_tokens, 0), coalesce(f.cached_input_tokens, 0),
                       coalesce(f.cache_write_input_tokens, 0), coalesce(f.cache_write_1h_input_tokens, 0),
                       coalesce(f.output_tokens, 0), 0, 0, p.price) AS priced
    FROM bill_facts f
    LEFT JOIN temp.prices p
      ON p.served_provider = f.provider AND p.served_model = f.model
     AND p.price_key IS NOT DISTINCT FROM bill_price_key(f.bucket_start, f.service_tier, f.prompt_over,
                                                         f.billing_account)
) f
LEFT JOIN temp.reconcile_models m ON m.provider = f.provider AND m.model = f.model
WHERE f.bucket_start >= getvariable('reconcile_cells_from') AND f.bucket_start < getvariable('reconcile_cells_until')
GROUP BY ALL;
