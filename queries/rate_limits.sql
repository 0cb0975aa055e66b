-- rate_limits.sql: rate-limited attempts (class rate_limit) by the limit they
-- hit (docs/record-format.md, "Headroom": the kind their response, or the
-- attempt just before them on the same route, said was used up) and the
-- provider and model that served them.
-- Parameters: none (reads temp.scope_attempts, built by scope.sql).
-- Columns:
--   served_provider, served_model
--   kind       requests | tokens | input_tokens | output_tokens | unknown
--   attempts   rate-limited attempts
SELECT served_provider, served_model, coalesce(limit_kind, 'unknown') AS kind, sum(attempts)::BIGINT AS attempts
FROM temp.scope_attempts
WHERE status = 'error' AND error_class = 'rate_limit'
GROUP BY ALL
HAVING sum(attempts) <> 0
ORDER BY attempts DESC, served_provider, served_model, kind;
