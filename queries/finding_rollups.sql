-- finding_rollups.sql: the per-workflow findings (facts.sql, temp.new_findings)
-- summed by minute, in the shapes of rollup_findings and rollup_finding_sets
-- (migrations/0009_finding_rollups.sql). Like rollups.sql, only sums and
-- counts: a set of workflows adds up from its parts, so the audit adds whole
-- minutes to edge minutes, and a write adds new rows minus old ones.
-- Not a report itself: it builds temp.r_findings and temp.r_finding_sets.
--
-- Parameters: temp.rollup_findings_source: rows shaped like
--   workflow_findings plus sign BIGINT (+1 adds the workflow, -1 takes its
--   old rows away), every row of each workflow it holds, and
--   temp.rollup_steps_source, the same workflows' steps, which are their
--   findings of kind `attempt` (the macro attempt_findings,
--   attempt_findings.sql); the macro
--   kept_label (labels.sql) and its variable fold_labels; the macro int64_of
--   (bounds.sql): each sum is a checked BIGINT.
-- Workflow names are folded by kept_label, as in the other rollups; the
--   classes are kept whole, since a policy's lists (approved fallback route
--   keys, classes) are matched against them. Their number is that of the
--   error classes, commit markers, layers and fallback route keys stored.
-- Columns of temp.r_findings: minute (of the workflow's first attempt),
--   workflow_name, kind, class, served_provider, served_model, cost_kind,
--   price_key, priced_kinds, seq (kind `attempt` only, else NULL), then the
--   sums of attempts, the token counts, emitter_cost_pusd and web searches.
-- Columns of temp.r_finding_sets: minute, workflow_name, kind, classes (the
--   sorted distinct classes one workflow had of that kind), then
--   workflows and workflow_attempts (every attempt of those workflows).
--   Besides the kinds of facts.sql (all but `attempt`), kind `after_error`
--   holds the union of a workflow's retry_after_error and
--   fallback_after_error classes: fail_closed_ignored reads both kinds, and
--   must count a workflow that did both once.
-- Groups whose every measure sums to 0 are dropped.
CREATE OR REPLACE TEMP VIEW finding_rows AS
SELECT * FROM temp.rollup_findings_source
UNION ALL BY NAME
SELECT * FROM attempt_findings('temp.rollup_steps_source');

CREATE OR REPLACE TEMP TABLE r_findings AS
SELECT date_trunc('minute', first_at) AS minute, kept_label('workflow', workflow_name) AS workflow_name,
       kind, class, served_provider, served_model, cost_kind, price_key, priced_kinds, seq,
       sum(sign * attempts)::BIGINT AS attempts,
       int64_of(sum(sign * input_tokens), 'rollup_findings.input_tokens') AS input_tokens,
       int64_of(sum(sign * output_tokens), 'rollup_findings.output_tokens') AS output_tokens,
       int64_of(sum(sign * cached_input_tokens), 'rollup_findings.cached_input_tokens') AS cached_input_tokens,
       int64_of(sum(sign * cache_write_input_tokens), 'rollup_findings.cache_write_input_tokens') AS cache_write_input_tokens,
       int64_of(sum(sign * emitter_cost_pusd), 'rollup_findings.emitter_cost_pusd') AS emitter_cost_pusd,
       int64_of(sum(sign * reasoning_output_tokens), 'rollup_findings.reasoning_output_tokens')
           AS reasoning_output_tokens,
       int64_of(sum(sign * cache_write_1h_input_tokens), 'rollup_findings.cache_write_1h_input_tokens')
           AS cache_write_1h_input_tokens,
       int64_of(sum(sign * web_search_requests), 'rollup_findings.web_search_requests') AS web_search_requests
FROM temp.finding_rows
GROUP BY ALL
HAVING sum(sign * attempts) <> 0 OR sum(sign * input_tokens) <> 0 OR sum(sign * output_tokens) <> 0
    OR sum(sign * cached_input_tokens) <> 0 OR sum(sign * cache_write_input_tokens) <> 0
    OR sum(sign * emitter_cost_pusd) <> 0 OR sum(sign * reasoning_output_tokens) <> 0
    OR sum(sign * cache_write_1h_input_tokens) <> 0 OR sum(sign * web_search_requests) <> 0;

CREATE OR REPLACE TEMP TABLE r_finding_sets AS
WITH workflows AS (
    -- A workflow with kind `attempt` rows has one per attempt; one without
    -- made a single attempt.
    SELECT sign, workflow_id, any_value(first_at) AS first_at, any_value(workflow_name) AS workflow_name,
           greatest(1, coalesce(sum(attempts) FILTER (WHERE kind = 'attempt'), 0))::BIGINT AS workflow_attempts
    FROM temp.finding_rows
    GROUP BY sign, workflow_id
),
sets AS (
    SELECT sign, workflow_id, kind, list_sort(list_distinct(list(class))) AS classes
    FROM (SELECT sign, workflow_id, kind, class FROM temp.rollup_findings_source
          UNION ALL
          SELECT sign, workflow_id, 'after_error', class FROM temp.rollup_findings_source
          WHERE kind IN ('retry_after_error', 'fallback_after_error'))
    GROUP BY sign, workflow_id, kind
)
SELECT date_trunc('minute', w.first_at) AS minute, kept_label('workflow', w.workflow_name) AS workflow_name,
       s.kind, s.classes,
       sum(s.sign)::BIGINT AS workflows,
       sum(s.sign * w.workflow_attempts)::BIGINT AS workflow_attempts
FROM sets s
JOIN workflows w USING (sign, workflow_id)
GROUP BY ALL
HAVING sum(s.sign) <> 0 OR sum(s.sign * w.workflow_attempts) <> 0;
