-- error_classes.sql: failed attempts by error class ("who owns the failure",
-- docs/record-format.md, "Error classes") and the requested provider.
-- Parameters: none (reads temp.scope_attempts, built by scope.sql).
-- Columns:
--   error_class   explicit or derived class; 'unknown' when neither applied
--   limit_kind    of class rate_limit, the limit hit (rate_limits.sql);
--                 NULL for every other class
--   provider      requested provider
--   attempts      failed attempts (status = 'error')
--   input_tokens, output_tokens   tokens those failures billed
--   cost_pusd     their known cost (pico-USD)
SELECT coalesce(error_class, 'unknown') AS error_class,
       CASE WHEN error_class = 'rate_limit' THEN coalesce(limit_kind, 'unknown') END AS limit_kind,
       provider,
       sum(attempts)::BIGINT AS attempts,
       coalesce(sum(input_tokens), 0)::HUGEINT  AS input_tokens,
       coalesce(sum(output_tokens), 0)::HUGEINT AS output_tokens,
       coalesce(sum(cost_pusd), 0)::HUGEINT AS cost_pusd
FROM temp.scope_attempts
WHERE status = 'error'
GROUP BY ALL
ORDER BY attempts DESC, error_class, limit_kind, provider;
