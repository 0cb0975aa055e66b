-- fallback_costs.sql: what each fallback activation (primary route,
-- fallback route, reason, as in fallbacks.sql) was and cost: the limit a
-- 429 before it hit, the models that served the fallbacks, what those
-- attempts cost against the same tokens at the primary's price, and how many
-- of the workflows started while the primary's breaker was open.
-- Parameters: none (the scope_* variables and in_window of window.sql;
--   temp.circuit_intervals of circuit_timeline.sql).
-- Reads: workflow_facts and workflow_spend of the window's workflows that
--   fell back (per-workflow rows: the rollups keep no fallback costs), and
--   their attempts off the primary route priced (temp.off_primary_spend,
--   off_primary_spend.sql).
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
spend AS (
    SELECT f.workflow_id,
           coalesce(list(s.limit_kind) FILTER (WHERE NOT s.off_primary AND s.limit_kind IS NOT NULL), [])
               AS limit_kinds,
           coalesce(list(s.served_provider || '/' || s.served_model) FILTER (WHERE s.off_primary), [])
               AS served_models
    FROM fell f
    JOIN workflow_spend s USING (workflow_id)
    GROUP BY f.workflow_id
),
off_primary AS (
    SELECT workflow_id,
           coalesce(sum(cost_pusd), 0)::HUGEINT AS fallback_cost_pusd,
           CASE WHEN bool_and(primary_pusd IS NOT NULL OR cost_kind = 'free') THEN
               coalesce(sum(primary_pusd) FILTER (WHERE cost_kind <> 'free'), 0)::HUGEINT
           END AS primary_cost_pusd,
           coalesce(sum(attempts) FILTER (WHERE unknown_reason IS NOT NULL), 0)::BIGINT AS unknown_cost_attempts
    FROM temp.off_primary_spend
    WHERE workflow_id IN (SELECT workflow_id FROM fell)
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
       coalesce(sum(o.fallback_cost_pusd), 0)::HUGEINT AS fallback_cost_pusd,
       -- A workflow with no attempt off its primary adds 0 to both costs.
       CASE WHEN bool_and(o.workflow_id IS NULL OR o.primary_cost_pusd IS NOT NULL)
            THEN coalesce(sum(o.primary_cost_pusd), 0) END::HUGEINT AS primary_cost_pusd,
       coalesce(sum(o.unknown_cost_attempts), 0)::BIGINT AS unknown_cost_attempts,
       count(b.workflow_id)::BIGINT AS breaker_open_workflows
FROM fell f
JOIN spend s USING (workflow_id)
LEFT JOIN off_primary o USING (workflow_id)
LEFT JOIN breaker b USING (workflow_id)
GROUP BY ALL
ORDER BY workflows DESC, f.primary_route_group NULLS FIRST, f.primary_provider, f.primary_model,
         f.fallback_route_group NULLS FIRST, f.fallback_provider, f.fallback_model, f.reason;
