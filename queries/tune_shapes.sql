-- tune_shapes.sql: what a replay by shape reads (docs/record-format.md,
-- "Tuning recovery"): the sums of the window's shapes and the shapes
-- themselves. With no time bound the sums are total_shapes' (the name's,
-- with a `--workflow` name the rollups keep); a window sums its own steps.
-- attempt_core::replay decides each shape once from temp.tune_shape_rows;
-- tune_replay.sql then sums what it decided.
--
-- Parameters: the scope_* variables of window.sql; temp.r_shapes
--   (shape_rollups.sql over the window's steps, store::tune: empty with no
--   time bound); the macro tune_every_shape() (store::tune: true when
--   every stored shape is in scope, read then without a join); the
--   variables tune_layers, tune_classes,
--   tune_decisions, tune_markers and tune_outcomes (VARCHAR[]: each enum's
--   names in the reader's order).
-- Not a single query: it builds the views temp.tune_shape_sums (the
--   columns of total_shapes, for the workflows in scope) and
--   temp.tune_shape_rows, which the reader reads.
-- Columns of temp.tune_shape_rows, one row per position of each shape in
-- scope, each shape's rows together and in order (stored so: the reader
-- checks, and orders by shape_key and seq when they are not):
--   shape_key, seq
--   length, outcome (its place)   the shape's, on its first row only (NULL after)
--   step                 the position, packed into bits (one column reads in
--                        a fraction of the time of seven):
--                          0-2    layer (its place)
--                          3      on a fallback route (effective_route)
--                          4      deliverable
--                          5-9    error class, its place + 1 (0: ok)
--                          10-12  decision, its place + 1 (0: none)
--                          13-15  commit marker, its place + 1 (0: none)
--                          16-31  route: its route key's number in the shape, from 0
CREATE OR REPLACE TEMP VIEW tune_shape_sums AS
SELECT t.* FROM total_shapes t
WHERE getvariable('scope_everything')
  AND (getvariable('scope_workflow') IS NULL OR t.workflow_name = getvariable('scope_workflow'))
UNION ALL BY NAME
SELECT w.* FROM temp.r_shapes w;

CREATE OR REPLACE TEMP VIEW tune_shape_rows AS
SELECT shape_key, seq,
       CASE WHEN seq = 1 THEN length END AS length,
       CASE WHEN seq = 1 THEN (list_position(getvariable('tune_outcomes'), outcome) - 1)::INTEGER END AS outcome,
       ((list_position(getvariable('tune_layers'), layer) - 1)
        + 8 * (effective_route = 'fallback')::INTEGER
        + 16 * deliverable::INTEGER
        + 32 * coalesce(list_position(getvariable('tune_classes'), error_class), 0)
        + 1024 * coalesce(list_position(getvariable('tune_decisions'), decision), 0)
        + 8192 * coalesce(list_position(getvariable('tune_markers'), commit_marker), 0)
        + 65536 * route::BIGINT)::BIGINT AS step
FROM shape_steps
WHERE tune_every_shape() OR shape_key IN (SELECT shape_key FROM temp.tune_shape_sums);
