-- slab_bounds.sql: where each slab of a rebuild starts: at the earliest
-- attempt of the first workflow past each multiple of slab_attempts
-- attempts, workflows taken in order of their earliest attempt.
-- Parameters: temp.workflow_span (workflow_span.sql); the variable
--   slab_attempts (BIGINT, at least 1).
-- Columns: bound TIMESTAMP, ascending (the first is the earliest attempt of
--   all).
SELECT min(earliest) AS bound FROM (
    SELECT earliest,
           (sum(n) OVER (ORDER BY earliest ROWS UNBOUNDED PRECEDING) - n) // getvariable('slab_attempts') AS part
    FROM temp.workflow_span)
GROUP BY part ORDER BY bound;
