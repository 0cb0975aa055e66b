-- reconcile_groups.sql: the stored attempts of a reconciliation's scope,
-- summed per finest bill cell and per everything their cost depends on,
-- in one pass over the attempts (docs/reconcile.md). Not a report itself:
-- it builds temp.reconcile_groups, from which the store names the models
-- (temp.reconcile_models) and prices the keys (temp.prices), and which
-- reconcile_ledger.sql prices a group at a time. A group holds attempts of
-- one price key that used the same kinds of tokens, so pricing its sums
-- gives exactly the sum of its attempts' costs (cost.sql's priced_pusd is
-- linear in the counts, and NULL for a group exactly when for each of its
-- attempts), as the report prices its rollups.
-- Parameters: the variables reconcile_since, reconcile_until (TIMESTAMP)
--   and reconcile_grain ('day' | 'hour'); cost.sql's macros.
-- Reads: attempts (by start, quarantined workflows apart), quarantine.
-- Columns of temp.reconcile_groups:
--   billing_provider   who bills: `openrouter` for its routes, else the
--                      served provider
--   billed_model       the model it bills (for OpenRouter the slug asked for)
--   cell_start, billing_account, service_tier (a batch attempt's is `batch`)
--   served_provider, served_model, price_key  what prices it
--   cost_kind          cost.sql's cost_kind_of
--   kinds              the kinds of tokens used (cost.sql's priced_kinds_of,
--                      for every attempt, whatever its cost kind: the
--                      bill reprices emitter-costed attempts too)
--   no_usage           no token count stated at all
--   unbilled           failed without output tokens (not billed)
--   attempts, emitter_pusd (the emitters' costs), input_tokens,
--   cached_input_tokens, cache_write_input_tokens,
--   cache_write_1h_input_tokens, output_tokens, reasoning_output_tokens,
--   web_search_requests     sums (HUGEINT)
CREATE OR REPLACE TEMP TABLE reconcile_groups AS
SELECT billing_provider, billed_model, cell_start, billing_account, service_tier, served_provider, served_model,
       price_key, cost_kind, kinds, no_usage, unbilled,
       count(*)::BIGINT AS attempts,
       sum(cost_pusd)::HUGEINT AS emitter_pusd,
       sum(input_tokens)::HUGEINT AS input_tokens,
       sum(cached_input_tokens)::HUGEINT AS cached_input_tokens,
       sum(cache_write_input_tokens)::HUGEINT AS cache_write_input_tokens,
       sum(cache_write_1h_input_tokens)::HUGEINT AS cache_write_1h_input_tokens,
       sum(output_tokens)::HUGEINT AS output_tokens,
       sum(reasoning_output_tokens)::HUGEINT AS reasoning_output_tokens,
       sum(web_search_requests)::HUGEINT AS web_search_requests
FROM (
    SELECT CASE WHEN a.provider = 'openrouter' THEN a.provider ELSE a.served_provider END AS billing_provider,
           -- OpenRouter bills the slug it was asked for, whoever served it.
           CASE WHEN a.provider = 'openrouter' THEN a.model ELSE a.served_model END AS billed_model,
           date_trunc(getvariable('reconcile_grain'), a.started_at) AS cell_start,
           a.billing_account, CASE WHEN a.batch THEN 'batch' ELSE a.service_tier END AS service_tier,
           a.served_provider, a.served_model, a.cost_pusd,
           price_key_of(a.started_at, a.batch, a.service_tier, a.input_tokens, a.billing_account) AS price_key,
           -- The report's rule (facts.sql): what each attempt is charged.
           cost_kind_of(a.cost_pusd, a.cost_currency, a.status, a.input_tokens, a.output_tokens,
                        a.cached_input_tokens, a.cache_write_input_tokens, a.web_search_requests) AS cost_kind,
           priced_kinds_of('priced', a.input_tokens, a.cached_input_tokens, a.cache_write_input_tokens,
                           a.cache_write_1h_input_tokens, a.output_tokens, a.reasoning_output_tokens,
                           a.web_search_requests) AS kinds,
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
)
GROUP BY ALL;
