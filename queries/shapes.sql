-- shapes.sql: adds the shapes of newly derived steps to shape_steps
-- (migrations/0017_shapes.sql), each shape once, position by position.
-- Not a report itself.
--
-- Parameters: temp.new_steps (facts.sql's output, or a view of every
--   stored step when rebuilding).
-- A position already stored adds nothing. A key's row that differs from
--   the stored one at a position (two shapes sharing a hash) is added
--   beside it: readers see two rows at one position and set the key apart.
-- Route keys are numbered in each shape in order of first use, so that
--   equal routes have equal numbers (what a replay compares).
-- Columns: none; it inserts rows into shape_steps.
INSERT INTO shape_steps
WITH fresh AS (
    SELECT DISTINCT shape_key, attempts AS length, outcome, seq, layer, route_key, effective_route, error_class,
           deliverable, decision, commit_marker
    FROM temp.new_steps
    EXCEPT
    SELECT shape_key, length, outcome, seq, layer, route_key, effective_route, error_class, deliverable, decision,
           commit_marker
    FROM shape_steps
    WHERE shape_key IN (SELECT shape_key FROM temp.new_steps)
),
used AS (
    SELECT *, min(seq) OVER (PARTITION BY shape_key, route_key) AS first_use FROM fresh
)
SELECT shape_key, length, outcome, seq, layer,
       (dense_rank() OVER (PARTITION BY shape_key ORDER BY first_use, route_key) - 1)::INTEGER AS route,
       route_key, effective_route, error_class, deliverable, decision, commit_marker
FROM used
ORDER BY shape_key, seq;
