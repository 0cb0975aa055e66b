-- audit.sql: where recovery broke its own rules (docs/record-format.md,
-- "The audit"): the findings facts.sql derived per workflow, with each
-- workflow's policy applied here, priced like the report.
-- Parameters: variables audit_from and audit_until (TIMESTAMP or NULL:
--   workflows whose first attempt started in [from, until)), audit_workflow
--   (VARCHAR or NULL: a workflow name), audit_examples (BIGINT: example
--   workflow ids per finding); temp.audit_policy (one row per named workflow
--   and one with workflow_name NULL, the default: retryable, fail_closed_on,
--   fail_closed_on_commit and approved_fallbacks as values joined by
--   chr(31), approved_fallbacks NULL for any, max_total_attempts,
--   max_elapsed_ms, max_extra_cost_pusd NULL for no limit, queue_allowed);
--   temp.prices and the macros of cost.sql.
-- Columns, one row per finding with at least one workflow:
--   finding                  nonretryable_retried | fallback_after_policy |
--                            fail_closed_ignored | replay_after_commit |
--                            retry_after_ignored | timeout_output_retried |
--                            stacked_retries | over_attempt_budget |
--                            over_time_budget | over_cost_budget |
--                            unapproved_fallback | queued_forbidden
--                            (stacked_retries: two or more layers each retried
--                            the same route after an error in one workflow; its
--                            attempts are all those retries, its class the layers,
--                            as app+sdk)
--   workflows                workflows with that finding
--   attempts                 the attempts that made it (the retried, fallen-back,
--                            replayed or over-budget ones; the timed-out one for
--                            timeout_output_retried)
--   input_tokens, output_tokens   their tokens
--   cost_pusd                their known cost (pico-USD); unknown_cost_attempts apart
--   unknown_cost_attempts
--   classes, class_attempts  the attempts by error class, commit marker, route or
--                            delivered | wasted (two lists in the same order)
--   examples                 up to audit_examples workflow ids, costliest first
WITH policy AS MATERIALIZED (
    SELECT workflow_name,
           string_split(retryable, chr(31)) AS retryable,
           string_split(fail_closed_on, chr(31)) AS fail_closed_on,
           string_split(fail_closed_on_commit, chr(31)) AS fail_closed_on_commit,
           string_split(approved_fallbacks, chr(31)) AS approved_fallbacks,
           max_total_attempts, max_elapsed_ms, max_extra_cost_pusd::HUGEINT AS max_extra_cost_pusd, queue_allowed
    FROM temp.audit_policy
),
-- Each row carries the name of its policy (NULL: the default) and that
-- policy's scalar limits; the lists are joined only where a check reads them.
scoped AS (
    SELECT f.*, n.workflow_name AS policy_name,
           CASE WHEN n.workflow_name IS NULL THEN d.max_total_attempts ELSE n.max_total_attempts END
               AS max_total_attempts,
           CASE WHEN n.workflow_name IS NULL THEN d.max_elapsed_ms ELSE n.max_elapsed_ms END AS max_elapsed_ms,
           CASE WHEN n.workflow_name IS NULL THEN d.max_extra_cost_pusd ELSE n.max_extra_cost_pusd END
               AS max_extra_cost_pusd,
           CASE WHEN n.workflow_name IS NULL THEN d.queue_allowed ELSE n.queue_allowed END AS queue_allowed
    FROM workflow_findings f
    LEFT JOIN policy n ON n.workflow_name = f.workflow_name
    CROSS JOIN (SELECT * FROM policy WHERE workflow_name IS NULL) d
    WHERE (getvariable('audit_from') IS NULL OR f.first_at >= getvariable('audit_from'))
      AND (getvariable('audit_until') IS NULL OR f.first_at < getvariable('audit_until'))
      AND (getvariable('audit_workflow') IS NULL OR f.workflow_name = getvariable('audit_workflow'))
),
priced AS MATERIALIZED (
    -- The attempt rows only where the workflow's policy has a budget: they
    -- are most of the table, and only the budgets read them.
    SELECT s.*,
           known_cost_pusd(s.cost_kind, s.emitter_cost_pusd, s.input_tokens, s.cached_input_tokens,
                           s.cache_write_input_tokens, s.output_tokens, p.input_pusd, p.cached_input_pusd,
                           p.cache_write_pusd, p.output_pusd) AS cost_pusd,
           CASE WHEN cost_is_unknown(s.cost_kind, p.served_model) THEN s.attempts ELSE 0 END AS unknown_cost_attempts
    FROM scoped s
    LEFT JOIN temp.prices p ON p.served_provider = s.served_provider AND p.served_model = s.served_model
    WHERE s.kind <> 'attempt'
       OR s.max_total_attempts IS NOT NULL OR s.max_elapsed_ms IS NOT NULL OR s.max_extra_cost_pusd IS NOT NULL
),
with_lists AS (
    SELECT f.*, r.retryable, r.fail_closed_on, r.fail_closed_on_commit, r.approved_fallbacks
    FROM priced f JOIN policy r ON r.workflow_name IS NOT DISTINCT FROM f.policy_name
    WHERE f.kind IN ('retry_after_error', 'fallback_after_error', 'replay_after_commit', 'fallback_route')
),
findings AS (
    SELECT * EXCLUDE (retryable, fail_closed_on, fail_closed_on_commit, approved_fallbacks),
           'nonretryable_retried' AS finding
    FROM with_lists WHERE kind = 'retry_after_error' AND NOT list_contains(retryable, class)
    UNION ALL
    SELECT *, 'fallback_after_policy' FROM priced WHERE kind = 'fallback_after_error' AND class = 'policy'
    UNION ALL
    SELECT * EXCLUDE (retryable, fail_closed_on, fail_closed_on_commit, approved_fallbacks), 'fail_closed_ignored'
    FROM with_lists
    WHERE kind IN ('retry_after_error', 'fallback_after_error') AND list_contains(fail_closed_on, class)
    UNION ALL
    SELECT * EXCLUDE (retryable, fail_closed_on, fail_closed_on_commit, approved_fallbacks), 'replay_after_commit'
    FROM with_lists WHERE kind = 'replay_after_commit' AND list_contains(fail_closed_on_commit, class)
    UNION ALL
    SELECT *, kind FROM priced WHERE kind IN ('retry_after_ignored', 'timeout_output_retried')
    UNION ALL
    SELECT *, 'over_attempt_budget' FROM priced WHERE kind = 'attempt' AND seq > max_total_attempts
    UNION ALL
    SELECT *, 'over_time_budget' FROM priced WHERE kind = 'attempt' AND offset_ms > max_elapsed_ms
    UNION ALL
    SELECT * EXCLUDE (extra_before), 'over_cost_budget'
    FROM (SELECT *,
                 -- Known cost of the wasted attempts before this one, in the workflow's order.
                 coalesce(sum(CASE WHEN class = 'wasted' THEN cost_pusd ELSE 0 END)
                              OVER (PARTITION BY workflow_id ORDER BY seq
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS extra_before
          FROM priced WHERE kind = 'attempt' AND max_extra_cost_pusd IS NOT NULL)
    WHERE extra_before > max_extra_cost_pusd
    UNION ALL
    SELECT * EXCLUDE (retryable, fail_closed_on, fail_closed_on_commit, approved_fallbacks), 'unapproved_fallback'
    FROM with_lists
    WHERE kind = 'fallback_route' AND approved_fallbacks IS NOT NULL AND NOT list_contains(approved_fallbacks, class)
    UNION ALL
    SELECT *, 'queued_forbidden' FROM priced WHERE kind = 'queued' AND NOT queue_allowed
),
stacked AS (
    -- Workflows where more than one layer retried the same route after a
    -- failure: each layer's retries multiply the others'.
    SELECT workflow_id, string_agg(DISTINCT layer, '+' ORDER BY layer) AS layers
    FROM priced
    WHERE kind = 'retry_after_error'
    GROUP BY workflow_id
    HAVING count(DISTINCT layer) > 1
),
all_findings AS (
    SELECT workflow_id, finding, class, attempts, input_tokens, output_tokens, cost_pusd, unknown_cost_attempts
    FROM findings
    UNION ALL
    SELECT f.workflow_id, 'stacked_retries', s.layers, f.attempts, f.input_tokens, f.output_tokens, f.cost_pusd,
           f.unknown_cost_attempts
    FROM priced f JOIN stacked s USING (workflow_id)
    WHERE f.kind = 'retry_after_error'
),
per_workflow AS (
    SELECT finding, workflow_id, sum(attempts) AS attempts, sum(input_tokens) AS input_tokens,
           sum(output_tokens) AS output_tokens, sum(cost_pusd) AS cost_pusd,
           sum(unknown_cost_attempts) AS unknown_cost_attempts
    FROM all_findings
    GROUP BY finding, workflow_id
),
per_class AS (
    SELECT finding, list(class ORDER BY class) AS classes, list(attempts ORDER BY class) AS class_attempts
    FROM (SELECT finding, class, sum(attempts)::BIGINT AS attempts FROM all_findings GROUP BY finding, class)
    GROUP BY finding
)
SELECT w.finding, count(*)::BIGINT AS workflows, sum(w.attempts)::BIGINT AS attempts,
       sum(w.input_tokens)::HUGEINT AS input_tokens, sum(w.output_tokens)::HUGEINT AS output_tokens,
       sum(w.cost_pusd)::HUGEINT AS cost_pusd, sum(w.unknown_cost_attempts)::BIGINT AS unknown_cost_attempts,
       any_value(c.classes) AS classes, any_value(c.class_attempts) AS class_attempts,
       list(w.workflow_id ORDER BY w.cost_pusd DESC, w.attempts DESC, w.workflow_id)[1:getvariable('audit_examples')]
           AS examples
FROM per_workflow w
JOIN per_class c USING (finding)
GROUP BY w.finding
ORDER BY w.finding;
