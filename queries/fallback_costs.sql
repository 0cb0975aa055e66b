-- fallback_costs.sql: what each fallback activation (primary route,
-- fallback route, reason, as in fallbacks.sql) was and cost: the limit a
-- 429 before it hit, the models that served the fallbacks, what those
-- attempts cost against the same tokens at the primary's price, and how many
-- of the workflows started while the primary's breaker was open.
-- Parameters: none (the scope_* variables and in_window of window.sql; the
--   prices of temp.prices and the macros of cost.sql; temp.circuit_intervals
--   of circuit_timeline.sql).
-- Reads: workflow_facts and workflow_spend of the window's workflows that
--   fell back (per-workflow rows: the rollups keep no fallback costs).
-- Columns:
--   primary_route_group, primary_provider, primary_model,
--   fallback_route_group, fallback_provider, fallback_model, reason
--                         the activation's key, as in fallbacks.sql
--   workflows             activations (equal to fallbacks.sql's)
--   limit_kinds           sorted limit kinds of the primary's 429s in those
--                         workflows (requests | tokens | ... | unknown)
--   served_models         sorted provider/model that served the fallbacks
--   fallback_cost_pusd    known cost of the attempts off the primary route
--   primary_cost_pusd     the same tokens at the primary's price on their
--                         day, tier, prompt size and account (NULL: the
--                         primary has no price for them)
--   unknown_cost_attempts fallback attempts whose cost is unknown
--   breaker_open_workflows  of the workflows, those whose first attempt
--                         started while the primary's breaker was open
WITH fell AS (
    SELECT workflow_id, workflow_name, first_at, primary_route_group,
           CASE WHEN primary_route_group IS NULL THEN primary_provider END AS primary_provider,
           CASE WHEN primary_route_group IS NULL THEN primary_model END AS primary_model,
           primary_provider AS priced_provider, primary_model AS priced_model,
           fallback_route_group,
           CASE WHEN fallback_route_group IS NULL THEN fallback_provider END AS fallback_provider,
           CASE WHEN fallback_route_group IS NULL THEN fallback_model END AS fallback_model,
           fallback_reason AS reason
    FROM workflow_facts
    WHERE fallback_reason IS NOT NULL AND in_window(first_at, workflow_name)
),
spend_priced AS (
    SELECT f.workflow_id, s.off_primary, s.limit_kind, s.served_provider, s.served_model, s.cost_kind, s.attempts,
           s.emitter_cost_pusd, p.price, p.unpriced,
           priced_pusd(s.input_tokens, s.cached_input_tokens, s.cache_write_input_tokens,
                       s.cache_write_1h_input_tokens, s.output_tokens, s.reasoning_output_tokens,
                       s.web_search_requests, p.price) AS priced,
           -- The same tokens at the primary's price, on the same day, tier,
           -- prompt size and account.
           priced_pusd(s.input_tokens, s.cached_input_tokens, s.cache_write_input_tokens,
                       s.cache_write_1h_input_tokens, s.output_tokens, s.reasoning_output_tokens,
                       s.web_search_requests, q.price) AS primary_pusd
    FROM fell f
    JOIN workflow_spend s USING (workflow_id)
    LEFT JOIN temp.prices p
      ON p.served_provider = s.served_provider AND p.served_model = s.served_model
     AND p.price_key IS NOT DISTINCT FROM s.price_key
    LEFT JOIN temp.prices q
      ON q.served_provider = f.priced_provider AND q.served_model = f.priced_model
     AND q.price_key IS NOT DISTINCT FROM s.price_key
),
spend_rows AS (
    SELECT workflow_id, off_primary, limit_kind, served_provider, served_model, cost_kind, attempts, primary_pusd,
           known_cost_of(cost_kind, emitter_cost_pusd, priced) AS cost_pusd,
           unknown_reason_of(cost_kind, price, unpriced, priced) AS unknown_reason
    FROM spend_priced
),
spend AS (
    SELECT workflow_id,
           coalesce(list(limit_kind) FILTER (WHERE NOT off_primary AND limit_kind IS NOT NULL), []) AS limit_kinds,
           coalesce(list(served_provider || '/' || served_model) FILTER (WHERE off_primary), []) AS served_models,
           coalesce(sum(cost_pusd) FILTER (WHERE off_primary), 0)::HUGEINT AS fallback_cost_pusd,
           CASE WHEN bool_and(primary_pusd IS NOT NULL OR cost_kind = 'free' OR NOT off_primary) THEN
               coalesce(sum(primary_pusd) FILTER (WHERE off_primary AND cost_kind <> 'free'), 0)::HUGEINT
           END AS primary_cost_pusd,
           coalesce(sum(attempts) FILTER (WHERE off_primary AND unknown_reason IS NOT NULL), 0)::BIGINT
               AS unknown_cost_attempts
    FROM spend_rows
    GROUP BY workflow_id
),
breaker AS (
    SELECT DISTINCT f.workflow_id
    FROM fell f
    JOIN temp.circuit_intervals c
      ON c.state = 'open' AND f.first_at >= c."from" AND (c."until" IS NULL OR f.first_at < c."until")
     AND (c.workflow_name IS NULL OR c.workflow_name = f.workflow_name)
     AND ((c.route_group IS NOT NULL AND c.route_group = f.primary_route_group)
          OR (c.route_group IS NULL AND f.primary_route_group IS NULL
              AND c.provider = f.primary_provider AND c.model = f.primary_model))
)
SELECT f.primary_route_group, f.primary_provider, f.primary_model,
       f.fallback_route_group, f.fallback_provider, f.fallback_model, f.reason,
       count(*)::BIGINT AS workflows,
       list_sort(list_distinct(flatten(list(s.limit_kinds)))) AS limit_kinds,
       list_sort(list_distinct(flatten(list(s.served_models)))) AS served_models,
       coalesce(sum(s.fallback_cost_pusd), 0)::HUGEINT AS fallback_cost_pusd,
       CASE WHEN bool_and(s.primary_cost_pusd IS NOT NULL) THEN sum(s.primary_cost_pusd) END::HUGEINT
           AS primary_cost_pusd,
       coalesce(sum(s.unknown_cost_attempts), 0)::BIGINT AS unknown_cost_attempts,
       count(b.workflow_id)::BIGINT AS breaker_open_workflows
FROM fell f
JOIN spend s USING (workflow_id)
LEFT JOIN breaker b USING (workflow_id)
GROUP BY ALL
ORDER BY workflows DESC, f.primary_route_group NULLS FIRST, f.primary_provider, f.primary_model,
         f.fallback_route_group NULLS FIRST, f.fallback_provider, f.fallback_model, f.reason;
