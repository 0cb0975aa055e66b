-- scope.sql: the derivation every report reads (attempt-record.md sections 4-6).
-- Not a report itself: it builds temp.scope, one row per attempt in scope.
--
-- Parameters:
--   $1 since    VARCHAR timestamp or NULL: first attempt started at or after
--   $2 until    VARCHAR timestamp or NULL: first attempt started before
--   $3 workflow VARCHAR or NULL: the workflow's name (`workflow` field)
--   A workflow is selected as a whole, by its first attempt and its name, so a
--   window never cuts a workflow in two and changes its outcome.
-- Reads: attempts; temp.prices (served_provider, served_model, input_pusd,
--   cached_input_pusd, output_pusd: pico-USD per token).
-- Columns of temp.scope (besides the stored attempt columns):
--   seq               1-based order in the workflow: attempt NULLS LAST, started_at, attempt_id
--   workflow_attempts attempts of the workflow
--   workflow_name     first non-NULL `workflow` in order
--   effective_route   route as stated, else primary iff provider+model is the primary route's
--   delivered         this is the workflow's delivered attempt
--   outcome           the workflow's outcome (section 4), on every row of it
--   wf_first_at, delivered_at  start of the first and of the delivered attempt
--   cost_pusd_eff     emitter's cost, else priced from temp.prices, else NULL (unknown)
CREATE OR REPLACE TEMP TABLE scope AS
WITH ordered AS (
    SELECT a.*,
           row_number() OVER w AS seq,
           count(*) OVER (PARTITION BY workflow_id) AS workflow_attempts
    FROM attempts a
    WINDOW w AS (PARTITION BY workflow_id ORDER BY attempt ASC NULLS LAST, started_at, attempt_id)
),
workflows AS (
    SELECT workflow_id,
           max(started_at) FILTER (WHERE seq = 1) AS wf_first_at,
           -- The primary route: the first attempt that says so, else the first attempt.
           coalesce(arg_min(provider, seq) FILTER (WHERE route = 'primary'),
                    max(provider) FILTER (WHERE seq = 1)) AS primary_provider,
           CASE WHEN count(*) FILTER (WHERE route = 'primary') > 0
                THEN arg_min(model, seq) FILTER (WHERE route = 'primary')
                ELSE max(model) FILTER (WHERE seq = 1) END AS primary_model,
           arg_min(workflow, seq) FILTER (WHERE workflow IS NOT NULL) AS workflow_name,
           min(seq) FILTER (WHERE status = 'ok'
                              AND (decision IS NULL OR decision NOT IN ('retry', 'fallback'))) AS delivered_seq,
           max(decision) FILTER (WHERE seq = workflow_attempts) AS last_decision
    FROM ordered
    GROUP BY workflow_id
),
selected AS (
    SELECT * FROM workflows
    WHERE ($1::VARCHAR IS NULL OR wf_first_at >= CAST($1 AS TIMESTAMP))
      AND ($2::VARCHAR IS NULL OR wf_first_at <  CAST($2 AS TIMESTAMP))
      AND ($3::VARCHAR IS NULL OR workflow_name = $3)
),
routed AS (
    SELECT o.*,
           w.wf_first_at, w.workflow_name, w.last_decision,
           coalesce(o.route, CASE WHEN o.provider = w.primary_provider AND o.model = w.primary_model
                                  THEN 'primary' ELSE 'fallback' END) AS effective_route,
           coalesce(o.seq = w.delivered_seq, false) AS delivered,
           w.delivered_seq
    FROM ordered o JOIN selected w USING (workflow_id)
),
judged AS (
    SELECT r.*,
           max(started_at) FILTER (WHERE delivered) OVER (PARTITION BY workflow_id) AS delivered_at,
           max(effective_route) FILTER (WHERE delivered) OVER (PARTITION BY workflow_id) AS delivered_route
    FROM routed r
)
SELECT j.* EXCLUDE (delivered_route, last_decision, delivered_seq),
       CASE WHEN delivered_seq = 1             THEN 'primary_success'
            WHEN delivered_route = 'primary'   THEN 'retry_recovery'
            WHEN delivered_route = 'fallback'  THEN 'fallback_recovery'
            WHEN last_decision = 'degrade'     THEN 'degraded'
            WHEN last_decision = 'queue'       THEN 'queued'
            WHEN last_decision IN ('retry', 'fallback') THEN 'in_flight'
            ELSE 'fail_closed' END AS outcome,
       CASE WHEN j.cost_pusd IS NOT NULL THEN j.cost_pusd::HUGEINT
            WHEN p.served_model IS NOT NULL THEN
                 (coalesce(j.input_tokens, 0) - coalesce(j.cached_input_tokens, 0))::HUGEINT * p.input_pusd
               + coalesce(j.cached_input_tokens, 0)::HUGEINT * p.cached_input_pusd
               + coalesce(j.output_tokens, 0)::HUGEINT * p.output_pusd
       END AS cost_pusd_eff
FROM judged j
LEFT JOIN temp.prices p
       ON p.served_provider = j.served_provider AND p.served_model = j.served_model;
