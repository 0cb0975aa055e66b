-- circuit_timeline.sql: every route's breaker timeline (docs/record-format.md,
-- "Breaker timelines"), as the view temp.circuit_intervals that
-- circuits.sql (the report) and metrics.sql (the current state) read.
-- Not a report itself.
-- Parameters: none.
-- Reads: circuit_changes (state-change records) and the attempts that carry
--   a `circuit` state.
-- Rules: a route's key is its group when it has one, else provider and
--   model, per caller (workflow_name; NULL: every caller). A change sets the
--   state from its instant; at one instant a state-change record wins over
--   an attempt's `circuit`, and of several, open over half_open over closed,
--   so arrival order never changes a timeline. An interval lasts until the
--   next change to another state; the last is open-ended (until NULL).
-- Columns of temp.circuit_intervals: provider, model (NULL for a group),
--   route_group, workflow_name, state (closed | open | half_open), from,
--   until.
CREATE OR REPLACE TEMP VIEW circuit_intervals AS
WITH changes AS (
    SELECT CASE WHEN route_group IS NULL THEN provider END AS provider,
           CASE WHEN route_group IS NULL THEN model END AS model,
           route_group, workflow_name, changed_at, state, 0 AS source
    FROM circuit_changes
    UNION ALL
    SELECT CASE WHEN route_group IS NULL THEN provider END, CASE WHEN route_group IS NULL THEN model END,
           route_group, workflow, started_at, circuit, 1
    FROM attempts
    WHERE circuit IS NOT NULL
),
instants AS (
    SELECT provider, model, route_group, workflow_name, changed_at,
           arg_min(state, source * 3 + CASE state WHEN 'open' THEN 0 WHEN 'half_open' THEN 1 ELSE 2 END) AS state
    FROM changes
    GROUP BY ALL
),
marked AS (
    SELECT *, lag(state) OVER (PARTITION BY provider, model, route_group, workflow_name ORDER BY changed_at) AS before
    FROM instants
)
SELECT provider, model, route_group, workflow_name, state, changed_at AS "from",
       lead(changed_at) OVER (PARTITION BY provider, model, route_group, workflow_name ORDER BY changed_at) AS "until"
FROM marked
WHERE before IS DISTINCT FROM state;
