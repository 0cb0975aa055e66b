-- served_errors.sql: the error rate of each served provider and model, by
-- error class: failed attempts of the class over every attempt the route
-- served ("who owns the failure", docs/record-format.md, "Error classes").
-- Parameters: none (reads temp.scope_attempts, built by scope.sql).
-- Columns:
--   served_provider, served_model   the route that answered (or failed)
--   error_class   explicit or derived class; 'unknown' when neither applied
--   failed        attempts of that class
--   attempts      every attempt the route served, the rate's denominator
WITH routes AS (
    SELECT served_provider, served_model, sum(attempts)::BIGINT AS attempts
    FROM temp.scope_attempts
    GROUP BY ALL
)
SELECT e.served_provider, e.served_model, coalesce(e.error_class, 'unknown') AS error_class,
       sum(e.attempts)::BIGINT AS failed, any_value(r.attempts) AS attempts
FROM temp.scope_attempts e
JOIN routes r ON r.served_provider = e.served_provider AND r.served_model = e.served_model
WHERE e.status = 'error'
GROUP BY e.served_provider, e.served_model, coalesce(e.error_class, 'unknown')
HAVING sum(e.attempts) <> 0
ORDER BY failed DESC, e.served_provider, e.served_model, error_class;
