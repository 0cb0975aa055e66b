-- retry_budget.sql: retry ratio per minute (docs/record-format.md, "Waste, cost, amplification"):
-- attempts that are not a workflow's first / first attempts, by the minute
-- the attempt started. A minute above the budget is an incident.
-- Parameters: $1 budget DOUBLE (0.10 = gRPC's default retry budget).
-- Columns:
--   minute          start of the minute (UTC)
--   first_attempts  workflows' first attempts started in it
--   retries         every other attempt started in it
--   ratio           retries / first_attempts; NULL when first_attempts = 0
--   over_budget     ratio > budget, or retries with no first attempt at all
SELECT date_trunc('minute', started_at) AS minute,
       count(*) FILTER (WHERE seq = 1) AS first_attempts,
       count(*) FILTER (WHERE seq > 1) AS retries,
       CASE WHEN count(*) FILTER (WHERE seq = 1) > 0
            THEN (count(*) FILTER (WHERE seq > 1))::DOUBLE / count(*) FILTER (WHERE seq = 1) END AS ratio,
       CASE WHEN count(*) FILTER (WHERE seq = 1) > 0
            THEN (count(*) FILTER (WHERE seq > 1))::DOUBLE / count(*) FILTER (WHERE seq = 1) > $1
            ELSE count(*) FILTER (WHERE seq > 1) > 0 END AS over_budget
FROM temp.scope
GROUP BY minute
ORDER BY minute;
