-- audit.sql: where recovery broke its own rules (docs/record-format.md,
-- "The audit"): the findings facts.sql derived per workflow, with each
-- workflow's policy applied here, priced like the report. It reads what a
-- report reads: the minute rollups (finding_rollups.sql) for the window's
-- whole minutes and the per-workflow rows for its edges. Only the time and
-- extra-cost budgets, which a policy may set, read the rows of every retried
-- workflow in the window: an attempt's elapsed time and the running cost
-- before it are per workflow, and the cost is priced when read.
-- Not a single query: it builds temp.audit_findings, which the store reads.
--
-- Parameters: the scope_* variables and macros of window.sql, run before
--   it with temp.rollup_findings_source feeding finding_rollups.sql
--   (temp.r_findings, temp.r_finding_sets) and rollups.sql (temp.r_attempts);
--   the variable audit_examples (BIGINT: example ids per finding);
--   temp.audit_policy (one row per named workflow and one with workflow_name
--   NULL, the default: retryable, fail_closed_on, fail_closed_on_commit and
--   approved_fallbacks as values joined by chr(31), approved_fallbacks NULL
--   for any; max_total_attempts, max_elapsed_ms, max_extra_cost_pusd NULL
--   for no limit; queue_allowed; retry_budget (retries per first attempt in
--   a minute) and retry_budget_floor (retries a minute may have whatever
--   the ratio); max_retries_sdk, _gateway, _app, _queue and
--   max_route_attempts NULL for no limit; fallback; fallback_on as values
--   joined by chr(31), NULL for any class; pinned; no_costlier_fallback);
--   temp.prices and the macros of cost.sql; the table macro
--   attempt_findings (attempt_findings.sql), through which the budgets read
--   the steps as findings of kind `attempt`.
-- Columns of temp.audit_findings, one row per finding with at least one
--   workflow (or minute):
--   finding                  nonretryable_retried | fallback_after_policy |
--                            fail_closed_ignored | replay_after_commit |
--                            retry_after_ignored | timeout_output_retried |
--                            stacked_retries | over_attempt_budget |
--                            over_time_budget | over_cost_budget |
--                            unapproved_fallback | queued_forbidden |
--                            over_retry_budget | over_layer_retries |
--                            over_route_attempts | fallback_forbidden |
--                            pinned_fallback | costlier_fallback
--   workflows                workflows with that finding (NULL for
--                            over_retry_budget, which is about minutes)
--   minutes                  over_retry_budget: the (workflow name, minute)
--                            pairs over the budget; NULL for the others
--   workflow_attempts        stacked_retries: every attempt of its workflows
--                            (their amplification is this / workflows)
--   attempts                 the attempts that made it (the retried, fallen-back,
--                            replayed or over-budget ones; the timed-out one for
--                            timeout_output_retried; the retries of the minutes
--                            over the retry budget)
--   input_tokens, output_tokens   their tokens
--   cost_pusd                their known cost (pico-USD); unknown_cost_attempts apart
--   unknown_cost_attempts
--   classes, class_attempts  the attempts by error class, commit marker, route,
--                            layers, delivered | wasted, or workflow name
--                            (over_retry_budget): two lists in the same order
--   examples                 up to audit_examples workflow ids, the latest
--                            first attempt first (over_retry_budget: minutes,
--                            as 'YYYY-MM-DDTHH:MM:SSZ', latest first)

-- The policy, lists split, and which one a workflow name gets.
CREATE OR REPLACE TEMP TABLE audit_rules AS
SELECT workflow_name,
       string_split(retryable, chr(31)) AS retryable,
       string_split(fail_closed_on, chr(31)) AS fail_closed_on,
       string_split(fail_closed_on_commit, chr(31)) AS fail_closed_on_commit,
       string_split(approved_fallbacks, chr(31)) AS approved_fallbacks,
       max_total_attempts, max_elapsed_ms, max_extra_cost_pusd::HUGEINT AS max_extra_cost_pusd, queue_allowed,
       retry_budget, retry_budget_floor, max_retries_sdk, max_retries_gateway, max_retries_app, max_retries_queue,
       max_route_attempts, fallback, string_split(fallback_on, chr(31)) AS fallback_on, pinned,
       no_costlier_fallback
FROM temp.audit_policy;

-- A row joins audit_named by its name (no row: the default's), then
-- audit_rules by that: the policy it gets.
CREATE OR REPLACE TEMP TABLE audit_named AS
SELECT workflow_name FROM temp.audit_rules WHERE workflow_name IS NOT NULL;

-- The findings one grouped row of attempts (kind, class) counts toward.
CREATE OR REPLACE TEMP MACRO row_findings(kind, class, retryable, fail_closed_on, fail_closed_on_commit,
                                          approved_fallbacks, queue_allowed) AS
    list_filter([
        CASE WHEN kind = 'retry_after_error' AND NOT list_contains(retryable, class)
             THEN 'nonretryable_retried' END,
        CASE WHEN kind = 'fallback_after_error' AND class = 'policy' THEN 'fallback_after_policy' END,
        CASE WHEN kind IN ('retry_after_error', 'fallback_after_error') AND list_contains(fail_closed_on, class)
             THEN 'fail_closed_ignored' END,
        CASE WHEN kind = 'replay_after_commit' AND list_contains(fail_closed_on_commit, class)
             THEN 'replay_after_commit' END,
        CASE WHEN kind IN ('retry_after_ignored', 'timeout_output_retried') THEN kind END,
        CASE WHEN kind = 'stacked_retry' THEN 'stacked_retries' END,
        CASE WHEN kind = 'fallback_route' AND approved_fallbacks IS NOT NULL
                  AND NOT list_contains(approved_fallbacks, class) THEN 'unapproved_fallback' END,
        CASE WHEN kind = 'queued' AND NOT queue_allowed THEN 'queued_forbidden' END
    ], lambda f: f IS NOT NULL);

-- The finding a workflow has for the classes it had of a kind: the same
-- rules as row_findings, over a set (kind after_error: fail_closed_ignored,
-- counted once for a workflow that both retried and fell back).
CREATE OR REPLACE TEMP MACRO set_finding(kind, classes, retryable, fail_closed_on, fail_closed_on_commit,
                                         approved_fallbacks, queue_allowed) AS
    CASE kind
        WHEN 'retry_after_error' THEN
             CASE WHEN len(list_filter(classes, lambda c: NOT list_contains(retryable, c))) > 0
                  THEN 'nonretryable_retried' END
        WHEN 'fallback_after_error' THEN
             CASE WHEN list_contains(classes, 'policy') THEN 'fallback_after_policy' END
        WHEN 'after_error' THEN
             CASE WHEN list_has_any(classes, fail_closed_on) THEN 'fail_closed_ignored' END
        WHEN 'replay_after_commit' THEN
             CASE WHEN list_has_any(classes, fail_closed_on_commit) THEN 'replay_after_commit' END
        WHEN 'retry_after_ignored' THEN kind
        WHEN 'timeout_output_retried' THEN kind
        WHEN 'stacked_retry' THEN 'stacked_retries'
        WHEN 'fallback_route' THEN
             CASE WHEN approved_fallbacks IS NOT NULL
                       AND len(list_filter(classes, lambda c: NOT list_contains(approved_fallbacks, c))) > 0
                  THEN 'unapproved_fallback' END
        WHEN 'queued' THEN CASE WHEN NOT queue_allowed THEN 'queued_forbidden' END
    END;

-- 1. Workflows: each workflow's class set of each kind, by minute, with its
--    finding under its policy.
CREATE OR REPLACE TEMP TABLE audit_sets AS
WITH sets AS (
    SELECT r.minute, r.workflow_name, r.kind, r.classes, r.workflows, r.workflow_attempts
    FROM rollup_finding_sets r
    WHERE in_whole_minutes(r.minute, r.workflow_name)
    UNION ALL
    SELECT minute, workflow_name, kind, classes, workflows, workflow_attempts FROM temp.r_finding_sets
)
SELECT * FROM (
    SELECT s.minute, s.workflows, s.workflow_attempts,
           set_finding(s.kind, s.classes, p.retryable, p.fail_closed_on, p.fail_closed_on_commit,
                       p.approved_fallbacks, p.queue_allowed) AS finding
    FROM sets s
    LEFT JOIN temp.audit_named n ON n.workflow_name = s.workflow_name
    JOIN temp.audit_rules p ON p.workflow_name IS NOT DISTINCT FROM n.workflow_name
)
WHERE finding IS NOT NULL;

-- 2. Attempts: the grouped attempt rows, priced, under each finding they
--    count toward; kind `attempt` rows past the attempt budget.
CREATE OR REPLACE TEMP TABLE audit_attempts AS
WITH grouped AS (
    SELECT r.* FROM rollup_findings r WHERE in_whole_minutes(r.minute, r.workflow_name)
    UNION ALL BY NAME
    SELECT * FROM temp.r_findings
),
grouped_priced AS (
    -- Priced once: the cost and why it is unknown both read `priced`.
    SELECT * FROM priced_rows(grouped)
),
priced AS (
    SELECT g.minute, g.kind, g.class, g.seq, g.attempts, g.input_tokens, g.output_tokens,
           known_cost_of(g.cost_kind, g.emitter_cost_pusd, g.priced) AS cost_pusd,
           CASE WHEN unknown_reason_of(g.cost_kind, g.price, g.unpriced, g.priced) IS NOT NULL THEN g.attempts ELSE 0 END
               AS unknown_cost_attempts,
           p.retryable, p.fail_closed_on, p.fail_closed_on_commit, p.approved_fallbacks, p.queue_allowed,
           p.max_total_attempts
    FROM grouped_priced g
    LEFT JOIN temp.audit_named n ON n.workflow_name = g.workflow_name
    JOIN temp.audit_rules p ON p.workflow_name IS NOT DISTINCT FROM n.workflow_name
)
SELECT finding, minute, class, attempts, input_tokens, output_tokens, cost_pusd, unknown_cost_attempts,
       0::BIGINT AS workflows
FROM (SELECT *, unnest(row_findings(kind, class, retryable, fail_closed_on, fail_closed_on_commit,
                                    approved_fallbacks, queue_allowed)) AS finding
      FROM priced WHERE kind <> 'attempt')
UNION ALL
-- A workflow past the attempt budget has exactly one attempt in the first
-- place past it.
SELECT 'over_attempt_budget', minute, class, attempts, input_tokens, output_tokens, cost_pusd,
       unknown_cost_attempts, CASE WHEN seq = max_total_attempts + 1 THEN attempts ELSE 0 END
FROM priced
WHERE kind = 'attempt' AND seq > max_total_attempts;

-- 3. The per-minute retry budget, per workflow name: its retries against
--    its first attempts in each minute its attempts started.
CREATE OR REPLACE TEMP TABLE audit_retry_minutes AS
WITH grouped AS (
    SELECT r.attempt_minute, r.workflow_name, r.retry, r.attempts, r.served_provider, r.served_model,
           r.cost_kind, r.price_key, r.input_tokens, r.output_tokens, r.cached_input_tokens,
           r.cache_write_input_tokens, r.cache_write_1h_input_tokens, r.reasoning_output_tokens,
           r.web_search_requests, r.emitter_cost_pusd
    FROM rollup_attempts r WHERE in_whole_minutes(r.minute, r.workflow_name)
    UNION ALL
    SELECT attempt_minute, workflow_name, retry, attempts, served_provider, served_model, cost_kind, price_key,
           input_tokens, output_tokens, cached_input_tokens, cache_write_input_tokens, cache_write_1h_input_tokens,
           reasoning_output_tokens, web_search_requests, emitter_cost_pusd
    FROM temp.r_attempts
),
grouped_priced AS (
    -- Priced once: the cost and why it is unknown both read `priced`.
    SELECT * FROM priced_rows(grouped)
),
minutes AS (
    SELECT g.attempt_minute, g.workflow_name,
           coalesce(sum(g.attempts) FILTER (WHERE NOT g.retry), 0) AS first_attempts,
           coalesce(sum(g.attempts) FILTER (WHERE g.retry), 0) AS retries,
           coalesce(sum(g.input_tokens) FILTER (WHERE g.retry), 0) AS input_tokens,
           coalesce(sum(g.output_tokens) FILTER (WHERE g.retry), 0) AS output_tokens,
           coalesce(sum(known_cost_of(g.cost_kind, g.emitter_cost_pusd, g.priced)) FILTER (WHERE g.retry), 0)
               AS cost_pusd,
           coalesce(sum(g.attempts) FILTER (WHERE g.retry AND unknown_reason_of(g.cost_kind, g.price, g.unpriced,
                                                                                g.priced) IS NOT NULL), 0)
               AS unknown_cost_attempts
    FROM grouped_priced g
    GROUP BY g.attempt_minute, g.workflow_name
)
SELECT m.*
FROM minutes m
LEFT JOIN temp.audit_named n ON n.workflow_name = m.workflow_name
JOIN temp.audit_rules p ON p.workflow_name IS NOT DISTINCT FROM n.workflow_name
WHERE m.retries > p.retry_budget_floor AND m.retries > p.retry_budget * m.first_attempts;

-- 4. The limits per layer and per route and the fallback rules, where a
--    policy sets one: the steps (workflow_steps) of the window's workflows
--    with more than one attempt, each offending attempt a row.
SET VARIABLE audit_any_step_limit = (
    SELECT count(*) > 0 FROM temp.audit_rules
    WHERE coalesce(max_retries_sdk, max_retries_gateway, max_retries_app, max_retries_queue,
                   max_route_attempts) IS NOT NULL
       OR NOT fallback OR fallback_on IS NOT NULL OR pinned OR no_costlier_fallback);
CREATE OR REPLACE TEMP TABLE audit_step_rows AS
WITH limited AS NOT MATERIALIZED (
    SELECT s.*, p.max_retries_sdk, p.max_retries_gateway, p.max_retries_app, p.max_retries_queue,
           p.max_route_attempts, p.fallback, p.fallback_on, p.pinned, p.no_costlier_fallback
    FROM workflow_steps s
    LEFT JOIN temp.audit_named n ON n.workflow_name = s.workflow_name
    JOIN temp.audit_rules p ON p.workflow_name IS NOT DISTINCT FROM n.workflow_name
    WHERE getvariable('audit_any_step_limit') AND in_window(s.first_at, s.workflow_name)
),
offending AS (
    SELECT 'over_layer_retries' AS finding, layer AS class, *
    FROM limited
    WHERE layer_retry > CASE layer WHEN 'sdk' THEN max_retries_sdk WHEN 'gateway' THEN max_retries_gateway
                                   WHEN 'app' THEN max_retries_app ELSE max_retries_queue END
    UNION ALL BY NAME
    SELECT 'over_route_attempts' AS finding, route_key AS class, *
    FROM limited WHERE route_attempt > max_route_attempts
    UNION ALL BY NAME
    -- A move onto a fallback route after a class fallback_on does not list
    -- (after_class 'none': nothing failed before it).
    SELECT 'fallback_forbidden' AS finding, after_class AS class, *
    FROM limited
    WHERE effective_route = 'fallback' AND seq > 1
      AND (NOT fallback OR (NOT retry AND fallback_on IS NOT NULL AND NOT list_contains(fallback_on, after_class)))
    UNION ALL BY NAME
    -- Any attempt on a fallback route of a workflow pinned to its model.
    SELECT 'pinned_fallback' AS finding, route_key AS class, *
    FROM limited
    WHERE effective_route = 'fallback' AND pinned
    UNION ALL BY NAME
    -- An attempt on a fallback route whose served model charges more per
    -- input or output token than the one that served the workflow's first
    -- attempt, both at the attempt's day, tier, prompt size and account
    -- (both priced; an unpriced model is no finding).
    SELECT 'costlier_fallback' AS finding, l.route_key AS class, l.*
    FROM (SELECT *, first_value(served_provider) OVER by_seq AS primary_served_provider,
                 first_value(served_model) OVER by_seq AS primary_served_model
          FROM limited WHERE no_costlier_fallback
          WINDOW by_seq AS (PARTITION BY workflow_id ORDER BY seq)) l
    JOIN temp.prices f
      ON f.served_provider = l.served_provider AND f.served_model = l.served_model
     AND f.price_key IS NOT DISTINCT FROM l.price_key
    JOIN temp.prices q
      ON q.served_provider = l.primary_served_provider AND q.served_model = l.primary_served_model
     AND q.price_key IS NOT DISTINCT FROM l.price_key
    WHERE l.effective_route = 'fallback'
      AND (f.price.input > q.price.input OR f.price.output > q.price.output)
)
SELECT finding, workflow_id, first_at, class, served_provider, served_model, cost_kind, price_key, priced_kinds,
       1::BIGINT AS attempts, input_tokens, output_tokens, cached_input_tokens, cache_write_input_tokens,
       cache_write_1h_input_tokens, reasoning_output_tokens, web_search_requests, emitter_cost_pusd,
       true AS first_over
FROM offending;

-- 5. The time and extra-cost budgets, where a policy sets one: the attempt
--    rows of the window's retried workflows, priced only where they count.
--    A constant bound lets the scan skip, before any join, the attempts that
--    no workflow's time budget can catch.
SET VARIABLE audit_min_elapsed_ms = (SELECT min(max_elapsed_ms) FROM temp.audit_rules);
SET VARIABLE audit_any_cost_budget = (SELECT count(max_extra_cost_pusd) > 0 FROM temp.audit_rules);
CREATE OR REPLACE TEMP VIEW audit_steps AS SELECT 1::BIGINT AS sign, * FROM workflow_steps;
CREATE OR REPLACE TEMP TABLE audit_budget_rows AS
WITH budgeted AS NOT MATERIALIZED (
    SELECT f.*, p.max_elapsed_ms, p.max_extra_cost_pusd
    FROM attempt_findings('temp.audit_steps') f
    LEFT JOIN temp.audit_named n ON n.workflow_name = f.workflow_name
    JOIN temp.audit_rules p ON p.workflow_name IS NOT DISTINCT FROM n.workflow_name
    WHERE in_window(f.first_at, f.workflow_name)
      AND (p.max_elapsed_ms IS NOT NULL OR p.max_extra_cost_pusd IS NOT NULL)
      AND (getvariable('audit_any_cost_budget') OR f.offset_ms > getvariable('audit_min_elapsed_ms'))
),
over_time AS (
    -- The first attempt past the budget is the one whose predecessors all
    -- started within it.
    SELECT 'over_time_budget' AS finding, *, coalesce(prev_offset_ms <= max_elapsed_ms, true) AS first_over
    FROM budgeted WHERE offset_ms > getvariable('audit_min_elapsed_ms') AND offset_ms > max_elapsed_ms
),
cost_rows AS NOT MATERIALIZED (
    SELECT b.*,
           known_cost_of(b.cost_kind, b.emitter_cost_pusd, priced_tokens(b, pr.price)) AS cost_pusd
    FROM budgeted b
    LEFT JOIN temp.prices pr
      ON pr.served_provider = b.served_provider AND pr.served_model = b.served_model
     AND pr.price_key IS NOT DISTINCT FROM b.price_key
    WHERE b.max_extra_cost_pusd IS NOT NULL
),
-- Only a workflow whose attempts not delivered cost more than its limit in
-- all can pass it: the running sum below is taken over those alone.
over_cost_workflows AS (
    SELECT workflow_id FROM cost_rows
    WHERE class = 'wasted'
    GROUP BY workflow_id, max_extra_cost_pusd
    HAVING sum(cost_pusd) > max_extra_cost_pusd
),
over_cost AS (
    -- The first attempt past the budget is the one before which the
    -- running cost passed it, and before whose predecessor it had not
    -- (costs are never negative).
    SELECT 'over_cost_budget' AS finding, * EXCLUDE (extra_before, extra_before_previous, cost_pusd),
           extra_before_previous <= max_extra_cost_pusd AS first_over
    FROM (SELECT *,
                 -- Known cost of the wasted attempts before this one, in the workflow's order.
                 coalesce(sum(CASE WHEN class = 'wasted' THEN cost_pusd ELSE 0 END)
                              OVER (PARTITION BY workflow_id ORDER BY seq
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS extra_before,
                 coalesce(sum(CASE WHEN class = 'wasted' THEN cost_pusd ELSE 0 END)
                              OVER (PARTITION BY workflow_id ORDER BY seq
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND 2 PRECEDING), 0) AS extra_before_previous
          FROM cost_rows SEMI JOIN over_cost_workflows USING (workflow_id))
    WHERE extra_before > max_extra_cost_pusd
),
over_rows AS (
    SELECT finding, workflow_id, first_at, class, served_provider, served_model, cost_kind, price_key, priced_kinds,
           attempts, input_tokens, output_tokens, cached_input_tokens, cache_write_input_tokens,
           cache_write_1h_input_tokens, reasoning_output_tokens, web_search_requests, emitter_cost_pusd, first_over
    FROM over_time
    UNION ALL
    SELECT finding, workflow_id, first_at, class, served_provider, served_model, cost_kind, price_key, priced_kinds,
           attempts, input_tokens, output_tokens, cached_input_tokens, cache_write_input_tokens,
           cache_write_1h_input_tokens, reasoning_output_tokens, web_search_requests, emitter_cost_pusd, first_over
    FROM over_cost
    UNION ALL
    SELECT * FROM temp.audit_step_rows
)
-- Kept small: the rows summed by class and served route, and the workflows
-- (each with whether one of its attempts is the first past its budget).
SELECT finding, class, served_provider, served_model, cost_kind, price_key, priced_kinds, sum(attempts) AS attempts,
       sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
       sum(cached_input_tokens) AS cached_input_tokens, sum(cache_write_input_tokens) AS cache_write_input_tokens,
       sum(cache_write_1h_input_tokens) AS cache_write_1h_input_tokens,
       sum(reasoning_output_tokens) AS reasoning_output_tokens, sum(web_search_requests) AS web_search_requests,
       sum(emitter_cost_pusd) AS emitter_cost_pusd, workflow_id, first_at, bool_or(first_over) AS first_over
FROM over_rows
GROUP BY GROUPING SETS ((finding, class, served_provider, served_model, cost_kind, price_key, priced_kinds),
                        (finding, workflow_id, first_at));

-- Their sums by class, priced, and their workflows.
CREATE OR REPLACE TEMP TABLE audit_budget_classes AS
WITH grouped AS (SELECT * FROM audit_budget_rows WHERE workflow_id IS NULL)
SELECT g.finding, g.class, g.attempts, g.input_tokens, g.output_tokens,
       known_cost_of(g.cost_kind, g.emitter_cost_pusd, g.priced) AS cost_pusd,
       CASE WHEN unknown_reason_of(g.cost_kind, g.price, g.unpriced, g.priced) IS NOT NULL THEN g.attempts ELSE 0 END
           AS unknown_cost_attempts
-- Priced once: the cost and why it is unknown both read `priced`.
FROM priced_rows(grouped) g;

CREATE OR REPLACE TEMP TABLE audit_budget_workflows AS
SELECT finding, count(*)::BIGINT AS workflows,
       list(workflow_id ORDER BY first_at DESC, workflow_id)[1:getvariable('audit_examples')] AS examples
FROM audit_budget_rows
WHERE workflow_id IS NOT NULL AND first_over
GROUP BY finding;

-- 6. Examples: the latest workflows of each finding. The rollups say from
--    which minute on each finding has enough of them, so only the
--    per-workflow rows from there on are read.
CREATE OR REPLACE TEMP TABLE audit_cutoffs AS
WITH by_minute AS (
    SELECT finding, minute, sum(workflows) AS workflows FROM audit_sets GROUP BY ALL
    UNION ALL
    SELECT finding, minute, sum(workflows) FROM audit_attempts
    WHERE finding = 'over_attempt_budget' GROUP BY ALL HAVING sum(workflows) > 0
),
running AS (
    SELECT finding, minute,
           sum(workflows) OVER (PARTITION BY finding ORDER BY minute DESC) AS from_here
    FROM by_minute
)
SELECT finding,
       coalesce(max(minute) FILTER (WHERE from_here >= getvariable('audit_examples')), min(minute)) AS cutoff
FROM running
GROUP BY finding;
SET VARIABLE audit_examples_from = (SELECT coalesce(min(cutoff), TIMESTAMP '9999-12-31') FROM temp.audit_cutoffs);

CREATE OR REPLACE TEMP TABLE audit_examples AS
WITH recent AS (
    SELECT f.workflow_id, f.first_at, f.workflow_name, f.kind, f.class, NULL::BIGINT AS seq
    FROM workflow_findings f
    WHERE f.first_at >= getvariable('audit_examples_from') AND in_window(f.first_at, f.workflow_name)
    UNION ALL
    SELECT f.workflow_id, f.first_at, f.workflow_name, f.kind, f.class, f.seq
    FROM attempt_findings('temp.audit_steps') f
    WHERE f.first_at >= getvariable('audit_examples_from') AND in_window(f.first_at, f.workflow_name)
      AND f.seq > 1
),
matched AS (
    SELECT r.workflow_id, r.first_at, unnest(row_findings(r.kind, r.class, p.retryable, p.fail_closed_on,
                                                           p.fail_closed_on_commit, p.approved_fallbacks,
                                                           p.queue_allowed)) AS finding
    FROM recent r
    LEFT JOIN temp.audit_named n ON n.workflow_name = r.workflow_name
    JOIN temp.audit_rules p ON p.workflow_name IS NOT DISTINCT FROM n.workflow_name
    WHERE r.kind <> 'attempt'
    UNION ALL
    SELECT r.workflow_id, r.first_at, 'over_attempt_budget'
    FROM recent r
    LEFT JOIN temp.audit_named n ON n.workflow_name = r.workflow_name
    JOIN temp.audit_rules p ON p.workflow_name IS NOT DISTINCT FROM n.workflow_name
    WHERE r.kind = 'attempt' AND r.seq = p.max_total_attempts + 1
),
latest AS (
    SELECT m.finding, m.workflow_id, max(m.first_at) AS first_at
    FROM matched m JOIN temp.audit_cutoffs c USING (finding)
    WHERE m.first_at >= c.cutoff
    GROUP BY ALL
)
SELECT finding,
       list(workflow_id ORDER BY first_at DESC, workflow_id)[1:getvariable('audit_examples')] AS examples
FROM latest
GROUP BY finding
UNION ALL
SELECT finding, examples FROM audit_budget_workflows;

-- 7. Each finding.
CREATE OR REPLACE TEMP TABLE audit_findings AS
WITH measured AS (
    SELECT finding, class, attempts, input_tokens, output_tokens, cost_pusd, unknown_cost_attempts
    FROM audit_attempts
    UNION ALL
    SELECT finding, class, attempts, input_tokens, output_tokens, cost_pusd, unknown_cost_attempts
    FROM audit_budget_classes
    UNION ALL
    SELECT 'over_retry_budget', coalesce(workflow_name, '(none)'), retries, input_tokens, output_tokens,
           cost_pusd, unknown_cost_attempts
    FROM audit_retry_minutes
),
totals AS (
    SELECT finding, sum(attempts)::BIGINT AS attempts, sum(input_tokens)::HUGEINT AS input_tokens,
           sum(output_tokens)::HUGEINT AS output_tokens, sum(cost_pusd)::HUGEINT AS cost_pusd,
           sum(unknown_cost_attempts)::BIGINT AS unknown_cost_attempts
    FROM measured GROUP BY finding
),
per_class AS (
    SELECT finding, list(class ORDER BY class) AS classes, list(attempts ORDER BY class) AS class_attempts
    FROM (SELECT finding, class, sum(attempts)::BIGINT AS attempts FROM measured GROUP BY finding, class)
    GROUP BY finding
),
counted AS (
    SELECT finding, sum(workflows)::BIGINT AS workflows, sum(workflow_attempts)::BIGINT AS workflow_attempts,
           NULL::BIGINT AS minutes
    FROM audit_sets GROUP BY finding
    UNION ALL
    SELECT finding, sum(workflows)::BIGINT, NULL, NULL
    FROM audit_attempts WHERE finding = 'over_attempt_budget' GROUP BY finding
    UNION ALL
    SELECT finding, workflows, NULL, NULL FROM audit_budget_workflows
    UNION ALL
    SELECT 'over_retry_budget', NULL, NULL, count(*)::BIGINT FROM audit_retry_minutes HAVING count(*) > 0
),
minute_examples AS (
    SELECT 'over_retry_budget' AS finding, list(minute ORDER BY minute DESC)[1:getvariable('audit_examples')] AS examples
    FROM (SELECT DISTINCT strftime(attempt_minute, '%Y-%m-%dT%H:%M:%SZ') AS minute FROM audit_retry_minutes)
)
SELECT c.finding, c.workflows, c.minutes,
       CASE WHEN c.finding = 'stacked_retries' THEN c.workflow_attempts END AS workflow_attempts,
       t.attempts, t.input_tokens, t.output_tokens, t.cost_pusd, t.unknown_cost_attempts,
       pc.classes, pc.class_attempts,
       coalesce(e.examples, m.examples, []::VARCHAR[]) AS examples
FROM counted c
JOIN totals t USING (finding)
JOIN per_class pc USING (finding)
LEFT JOIN temp.audit_examples e USING (finding)
LEFT JOIN minute_examples m USING (finding)
WHERE coalesce(c.workflows, c.minutes) > 0;
