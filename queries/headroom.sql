-- headroom.sql: rate-limit headroom as the providers stated it
-- (docs/record-format.md, "Headroom"), per served provider, model, billing
-- account and kind, over the workflows in the window, and when it ran out.
-- Parameters: none (the scope_* variables and in_window of window.sql).
-- Reads: workflow_headroom (rows only for attempts that stated headroom or
--   were rate-limited, so a store without headroom reads nothing).
-- Columns:
--   served_provider, served_model, billing_account (NULL: none stated), kind
--                         requests | tokens | input_tokens | output_tokens |
--                         unknown (429s whose kind no response told)
--   remaining, limit      the latest response's statement (NULL: none stated)
--   min_ratio             lowest remaining / limit stated (NULL without a limit)
--   min_at                the minute of the first attempt that stated it
--   attempts_below_10pct  attempts whose response stated under 10 % remaining
--   first_below_10pct_at  the first of them
--   rate_limited          429s that hit this kind's limit
--   first_429_at          the first of them
-- Ties in time go to the workflow with the greater id, so the answer does
-- not depend on the order rows were stored in.
SELECT served_provider, served_model, billing_account, kind,
       arg_max(last_remaining, {'at': last_at, 'workflow': workflow_id}) FILTER (WHERE last_at IS NOT NULL) AS remaining,
       arg_max(last_limit, {'at': last_at, 'workflow': workflow_id}) FILTER (WHERE last_at IS NOT NULL) AS "limit",
       min(min_ratio) AS min_ratio,
       date_trunc('minute', arg_min(min_at, {'ratio': min_ratio, 'at': min_at}) FILTER (WHERE min_ratio IS NOT NULL))
           AS min_at,
       sum(below_10pct)::BIGINT AS attempts_below_10pct,
       min(first_below_10pct_at) AS first_below_10pct_at,
       sum(rate_limited)::BIGINT AS rate_limited,
       min(first_429_at) AS first_429_at
FROM workflow_headroom
WHERE in_window(first_at, workflow_name)
GROUP BY served_provider, served_model, billing_account, kind
ORDER BY min_ratio NULLS LAST, served_provider, served_model, billing_account NULLS FIRST, kind;
