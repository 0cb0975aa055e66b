-- workflow_circuits.sql: the breaker states one workflow met, for its page
-- and GET /api/v1/workflows/{workflow_id}: every open or half-open interval
-- (circuit_timeline.sql) of a route one of its attempts asked (by group,
-- else provider and model), of its caller or of every caller, that overlaps
-- the workflow's span (its first attempt's start to the end of its last).
-- Parameters: temp.fact_attempts (facts.sql run over this one workflow, as
--   for workflow.sql) and temp.circuit_intervals.
-- Columns, oldest interval first:
--   provider, model, route_group, workflow_name, state (open | half_open)
--   from_us, until_us   the interval, microseconds since the epoch (until
--                       NULL while it lasts)
--   attempts            this workflow's attempts to the route that started in it
WITH span AS (
    SELECT min(started_at) AS first_at,
           max(started_at + to_microseconds(round(coalesce(duration_ms, 0) * 1000)::BIGINT)) AS last_end
    FROM temp.fact_attempts
),
shown AS (
    SELECT i.*
    FROM temp.circuit_intervals i, span
    WHERE i.state <> 'closed' AND i."from" <= span.last_end AND (i."until" IS NULL OR i."until" > span.first_at)
)
SELECT s.provider, s.model, s.route_group, s.workflow_name, s.state,
       epoch_us(s."from") AS from_us, epoch_us(s."until") AS until_us,
       count(*) FILTER (WHERE a.started_at >= s."from" AND (s."until" IS NULL OR a.started_at < s."until"))
           AS attempts
FROM shown s
JOIN temp.fact_attempts a
  ON (s.workflow_name IS NULL OR s.workflow_name = a.workflow_name)
 AND ((s.route_group IS NOT NULL AND a.route_group = s.route_group)
      OR (s.route_group IS NULL AND a.route_group IS NULL AND a.provider = s.provider AND a.model = s.model))
GROUP BY s.provider, s.model, s.route_group, s.workflow_name, s.state, s."from", s."until"
ORDER BY s."from", s.route_group NULLS FIRST, s.provider, s.model, s.workflow_name NULLS FIRST;
