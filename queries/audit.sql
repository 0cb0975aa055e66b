-- audit.sql: where recovery broke its own rules (docs/record-format.md,
-- "The audit"): the findings facts.sql derived per workflow, with the
-- policy applied here, priced like the report.
-- Parameters: variables audit_from and audit_until (TIMESTAMP or NULL:
--   workflows whose first attempt started in [from, until)), audit_workflow
--   (VARCHAR or NULL: a workflow name), audit_nonretryable (VARCHAR[]: the
--   error classes that must not be retried on the same route), audit_examples
--   (BIGINT: example workflow ids per finding); temp.prices and the macros of
--   cost.sql.
-- Columns, one row per finding with at least one workflow:
--   finding                  nonretryable_retried | fallback_after_policy |
--                            replay_after_commit | retry_after_ignored |
--                            timeout_output_retried | stacked_retries (two or more
--                            layers each retried the same route after an error in
--                            one workflow: its attempts are all those retries, its
--                            class the layers, as app+sdk)
--   workflows                workflows with that finding
--   attempts                 the attempts that made it (the retried, fallen-back or
--                            replayed ones; the timed-out one for timeout_output_retried)
--   input_tokens, output_tokens   their tokens
--   cost_pusd                their known cost (pico-USD); unknown_cost_attempts apart
--   unknown_cost_attempts
--   classes, class_attempts  the attempts by error class or commit state (two
--                            lists in the same order, by class)
--   examples                 up to audit_examples workflow ids, costliest first
WITH findings AS (
    SELECT f.*,
           CASE WHEN f.kind = 'retry_after_error' AND list_contains(getvariable('audit_nonretryable'), f.class)
                    THEN 'nonretryable_retried'
                WHEN f.kind = 'fallback_after_error' AND f.class = 'policy' THEN 'fallback_after_policy'
                WHEN f.kind IN ('replay_after_commit', 'retry_after_ignored', 'timeout_output_retried') THEN f.kind
           END AS finding,
           known_cost_pusd(f.cost_kind, f.emitter_cost_pusd, f.input_tokens, f.cached_input_tokens,
                           f.cache_write_input_tokens, f.output_tokens, p.input_pusd, p.cached_input_pusd,
                           p.cache_write_pusd, p.output_pusd) AS cost_pusd,
           CASE WHEN cost_is_unknown(f.cost_kind, p.served_model) THEN f.attempts ELSE 0 END AS unknown_cost_attempts
    FROM workflow_findings f
    LEFT JOIN temp.prices p ON p.served_provider = f.served_provider AND p.served_model = f.served_model
    WHERE (getvariable('audit_from') IS NULL OR f.first_at >= getvariable('audit_from'))
      AND (getvariable('audit_until') IS NULL OR f.first_at < getvariable('audit_until'))
      AND (getvariable('audit_workflow') IS NULL OR f.workflow_name = getvariable('audit_workflow'))
),
stacked AS (
    -- Workflows where more than one layer retried the same route after a
    -- failure: each layer's retries multiply the others'.
    SELECT workflow_id, string_agg(DISTINCT layer, '+' ORDER BY layer) AS layers
    FROM findings
    WHERE kind = 'retry_after_error'
    GROUP BY workflow_id
    HAVING count(DISTINCT layer) > 1
),
all_findings AS (
    SELECT * FROM findings WHERE finding IS NOT NULL
    UNION ALL BY NAME
    SELECT f.* EXCLUDE (finding, class), 'stacked_retries' AS finding, s.layers AS class
    FROM findings f JOIN stacked s USING (workflow_id)
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
    FROM (SELECT finding, class, sum(attempts)::BIGINT AS attempts
          FROM all_findings GROUP BY finding, class)
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
