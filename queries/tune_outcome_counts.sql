-- tune_outcome_counts.sql: the workflows in scope of a replay by shape, by
-- what their (section, shape) plan does to them (docs/record-format.md,
-- "Tuning recovery"). Equal times are counted, not sent one by one: the
-- answer's time quantiles are exact over these counts.
--
-- Parameters: the scope_* variables and in_window of window.sql;
--   temp.tune_plans (store::tune: per policy section and shape, whether the
--   plan changes its workflows); the macro tune_section(name) (the policy
--   section a workflow name replays under).
-- Columns:
--   outcome_ms   the recorded time to outcome (plan 0), NULL otherwise
--   plan         0 left as recorded (one attempt, or a plan that keeps
--                every attempt and the outcome), 1 changed by its plan
--                (read with their times by store::tune), 2 no plan: its
--                shape set apart and replayed workflow by workflow
--   workflows    how many
WITH scoped AS NOT MATERIALIZED (
    SELECT outcome_ms, shape_key, workflow_name
    FROM workflow_facts
    WHERE in_window(first_at, workflow_name)
)
SELECT outcome_ms, 0 AS plan, count(*)::UBIGINT AS workflows
FROM scoped
WHERE shape_key IS NULL
GROUP BY outcome_ms
UNION ALL
SELECT CASE WHEN NOT p.changed THEN s.outcome_ms END AS outcome_ms,
       CASE WHEN p.changed IS NULL THEN 2 WHEN p.changed THEN 1 ELSE 0 END AS plan,
       count(*)::UBIGINT AS workflows
FROM scoped s
LEFT JOIN temp.tune_plans p
  ON p.shape_key = s.shape_key
 AND p.section = tune_section(s.workflow_name)
WHERE s.shape_key IS NOT NULL
GROUP BY ALL;
