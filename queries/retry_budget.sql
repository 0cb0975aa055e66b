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
WITH minutes AS (
    SELECT attempt_minute AS minute,
           coalesce(sum(attempts) FILTER (WHERE NOT retry), 0)::BIGINT AS first_attempts,
           coalesce(sum(attempts) FILTER (WHERE retry), 0)::BIGINT AS retries
    FROM temp.scope_minutes
    GROUP BY attempt_minute
)
SELECT minute, first_attempts, retries,
       CASE WHEN first_attempts > 0 THEN retries::DOUBLE / first_attempts END AS ratio,
       CASE WHEN first_attempts > 0 THEN retries::DOUBLE / first_attempts > $1
            ELSE retries > 0 END AS over_budget
FROM minutes
ORDER BY minute;
