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
WITH policy AS (
    SELECT workflow_name,
           {'retryable': string_split(retryable, chr(31)),
            'fail_closed_on': string_split(fail_closed_on, chr(31)),
            'fail_closed_on_commit': string_split(fail_closed_on_commit, chr(31)),
            'approved_fallbacks': string_split(approved_fallbacks, chr(31)),
            'max_total_attempts': max_total_attempts, 'max_elapsed_ms': max_elapsed_ms,
            'max_extra_cost_pusd': max_extra_cost_pusd::HUGEINT, 'queue_allowed': queue_allowed} AS rules
    FROM temp.audit_policy
),
priced AS (
    SELECT f.*, coalesce(n.rules, d.rules) AS rules,
           known_cost_pusd(f.cost_kind, f.emitter_cost_pusd, f.input_tokens, f.cached_input_tokens,
                           f.cache_write_input_tokens, f.output_tokens, p.input_pusd, p.cached_input_pusd,
                           p.cache_write_pusd, p.output_pusd) AS cost_pusd,
           CASE WHEN cost_is_unknown(f.cost_kind, p.served_model) THEN f.attempts ELSE 0 END AS unknown_cost_attempts
    FROM workflow_findings f
    LEFT JOIN temp.prices p ON p.served_provider = f.served_provider AND p.served_model = f.served_model
    LEFT JOIN policy n ON n.workflow_name = f.workflow_name
    CROSS JOIN (SELECT rules FROM policy WHERE workflow_name IS NULL) d
    WHERE (getvariable('audit_from') IS NULL OR f.first_at >= getvariable('audit_from'))
      AND (getvariable('audit_until') IS NULL OR f.first_at < getvariable('audit_until'))
      AND (getvariable('audit_workflow') IS NULL OR f.workflow_name = getvariable('audit_workflow'))
),
spent AS (
    -- Known cost of the wasted attempts before each one, in the workflow's order.
    SELECT *,
           CASE WHEN kind = 'attempt' THEN
               coalesce(sum(CASE WHEN class = 'wasted' THEN cost_pusd ELSE 0 END)
                            OVER (PARTITION BY workflow_id, kind ORDER BY seq
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) END AS extra_before
    FROM priced
),
findings AS (
    SELECT * EXCLUDE (found), unnest(found) AS finding
    FROM (SELECT *, list_filter([
              CASE WHEN kind = 'retry_after_error' AND NOT list_contains(rules.retryable, class)
                   THEN 'nonretryable_retried' END,
              CASE WHEN kind = 'fallback_after_error' AND class = 'policy' THEN 'fallback_after_policy' END,
              CASE WHEN kind IN ('retry_after_error', 'fallback_after_error')
                        AND list_contains(rules.fail_closed_on, class) THEN 'fail_closed_ignored' END,
              CASE WHEN kind = 'replay_after_commit' AND list_contains(rules.fail_closed_on_commit, class)
                   THEN 'replay_after_commit' END,
              CASE WHEN kind IN ('retry_after_ignored', 'timeout_output_retried') THEN kind END,
              CASE WHEN kind = 'attempt' AND seq > rules.max_total_attempts THEN 'over_attempt_budget' END,
              CASE WHEN kind = 'attempt' AND offset_ms > rules.max_elapsed_ms THEN 'over_time_budget' END,
              CASE WHEN kind = 'attempt' AND extra_before > rules.max_extra_cost_pusd THEN 'over_cost_budget' END,
              CASE WHEN kind = 'fallback_route' AND rules.approved_fallbacks IS NOT NULL
                        AND NOT list_contains(rules.approved_fallbacks, class) THEN 'unapproved_fallback' END,
              CASE WHEN kind = 'queued' AND NOT rules.queue_allowed THEN 'queued_forbidden' END
          ], lambda x: x IS NOT NULL) AS found
          FROM spent)
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
