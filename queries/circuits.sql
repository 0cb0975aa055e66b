-- circuits.sql: breaker timelines (docs/record-format.md, "Breaker
-- timelines"): per route and caller, the open and half-open intervals that
-- overlap the window, the workflows that started while their primary
-- route's breaker was open and how they ended, what their fallbacks cost
-- against the primary's price, and the probes of each half-open interval.
-- Parameters: none (the scope_* variables and in_window of window.sql).
-- Reads: temp.circuit_intervals (circuit_timeline.sql: the rules of a
--   timeline), workflow_facts, temp.off_primary_spend (off_primary_spend.sql:
--   the window's attempts off their primary route, priced), attempts (the
--   probes).
-- A workflow started while the breaker was open when its first attempt
-- started in an open interval of its primary route (of its caller, or of
-- every caller).
-- Columns:
--   provider, model      the route (NULL when it is a group)
--   route_group          the route's group (NULL: none)
--   workflow             whose breaker (NULL: every caller's)
--   state                open | half_open
--   from, until          the interval (until NULL while it lasts)
--   workflows, primary_success, retry_recovery, fallback_recovery, degraded,
--   fail_closed, queued, in_flight
--                        open intervals: the workflows in the window that
--                        started in it, by outcome (0 for half_open)
--   fallback_cost_pusd   what those workflows' attempts off their primary
--                        route cost (known costs, pico-USD)
--   primary_cost_pusd    the same attempts' tokens at the primary's price
--                        on their day, tier, prompt size and account
--                        (NULL: the primary has no price for them)
--   unknown_cost_attempts  fallback attempts whose cost is unknown
--   probes, probes_succeeded  half_open intervals: attempts sent to the
--                        route in it, and of those the successes (0 for open)
WITH shown AS (
    SELECT *, row_number() OVER (ORDER BY "from", route_group, provider, model, workflow_name) AS id
    FROM temp.circuit_intervals
    WHERE state <> 'closed'
      AND (getvariable('scope_workflow') IS NULL OR workflow_name IS NULL
           OR workflow_name = getvariable('scope_workflow'))
      AND (getvariable('scope_until') IS NULL OR "from" < getvariable('scope_until'))
      AND (getvariable('scope_since') IS NULL OR "until" IS NULL OR "until" > getvariable('scope_since'))
),
started AS (
    SELECT s.id, f.workflow_id, f.outcome, f.primary_provider, f.primary_model
    FROM shown s
    JOIN workflow_facts f
      ON f.first_at >= s."from" AND (s."until" IS NULL OR f.first_at < s."until")
     AND (s.workflow_name IS NULL OR f.workflow_name = s.workflow_name)
     AND ((s.route_group IS NOT NULL AND f.primary_route_group = s.route_group)
          OR (s.route_group IS NULL AND f.primary_route_group IS NULL
              AND f.primary_provider = s.provider AND f.primary_model = s.model))
    WHERE s.state = 'open' AND in_window(f.first_at, f.workflow_name)
),
outcomes AS (
    SELECT id,
           count(*)::BIGINT AS workflows,
           count(*) FILTER (WHERE outcome = 'primary_success')::BIGINT AS primary_success,
           count(*) FILTER (WHERE outcome = 'retry_recovery')::BIGINT AS retry_recovery,
           count(*) FILTER (WHERE outcome = 'fallback_recovery')::BIGINT AS fallback_recovery,
           count(*) FILTER (WHERE outcome = 'degraded')::BIGINT AS degraded,
           count(*) FILTER (WHERE outcome = 'fail_closed')::BIGINT AS fail_closed,
           count(*) FILTER (WHERE outcome = 'queued')::BIGINT AS queued,
           count(*) FILTER (WHERE outcome = 'in_flight')::BIGINT AS in_flight
    FROM started
    GROUP BY ALL
),
fallback_spend AS (
    SELECT w.id,
           coalesce(sum(s.cost_pusd), 0)::HUGEINT AS fallback_cost_pusd,
           -- NULL as soon as one workflow's primary has no price for its
           -- tokens: a partial comparison would understate what the primary
           -- would have cost.
           CASE WHEN bool_and(s.cost_kind = 'free' OR s.primary_pusd IS NOT NULL) THEN
               coalesce(sum(s.primary_pusd) FILTER (WHERE s.cost_kind <> 'free'), 0)::HUGEINT
           END AS primary_cost_pusd,
           coalesce(sum(s.attempts) FILTER (WHERE s.unknown_reason IS NOT NULL), 0)::BIGINT AS unknown_cost_attempts
    FROM started w
    JOIN temp.off_primary_spend s ON s.workflow_id = w.workflow_id
    GROUP BY w.id
),
probes AS (
    SELECT s.id,
           count(*)::BIGINT AS probes,
           count(*) FILTER (WHERE a.status = 'ok')::BIGINT AS probes_succeeded
    FROM shown s
    JOIN attempts a
      ON a.started_at >= s."from" AND (s."until" IS NULL OR a.started_at < s."until")
     AND (s.workflow_name IS NULL OR a.workflow = s.workflow_name)
     AND ((s.route_group IS NOT NULL AND a.route_group = s.route_group)
          OR (s.route_group IS NULL AND a.route_group IS NULL AND a.provider = s.provider AND a.model = s.model))
    WHERE s.state = 'half_open'
    GROUP BY ALL
)
SELECT s.provider, s.model, s.route_group, s.workflow_name AS workflow, s.state, s."from", s."until",
       coalesce(o.workflows, 0)::BIGINT AS workflows,
       coalesce(o.primary_success, 0)::BIGINT AS primary_success,
       coalesce(o.retry_recovery, 0)::BIGINT AS retry_recovery,
       coalesce(o.fallback_recovery, 0)::BIGINT AS fallback_recovery,
       coalesce(o.degraded, 0)::BIGINT AS degraded,
       coalesce(o.fail_closed, 0)::BIGINT AS fail_closed,
       coalesce(o.queued, 0)::BIGINT AS queued,
       coalesce(o.in_flight, 0)::BIGINT AS in_flight,
       coalesce(c.fallback_cost_pusd, 0)::HUGEINT AS fallback_cost_pusd,
       CASE WHEN c.id IS NULL THEN 0::HUGEINT ELSE c.primary_cost_pusd END
           AS primary_cost_pusd,
       coalesce(c.unknown_cost_attempts, 0)::BIGINT AS unknown_cost_attempts,
       coalesce(p.probes, 0)::BIGINT AS probes,
       coalesce(p.probes_succeeded, 0)::BIGINT AS probes_succeeded
FROM shown s
LEFT JOIN outcomes o USING (id)
LEFT JOIN fallback_spend c USING (id)
LEFT JOIN probes p USING (id)
ORDER BY s.id;
