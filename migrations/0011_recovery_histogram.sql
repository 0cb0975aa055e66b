-- Recovery times (first attempt to the delivered one) as a histogram by
-- minute, like latency: a report reads a window's percentiles from these
-- rollups instead of every recovered workflow's facts. Buckets are in whole
-- microseconds (`le_us`: the bucket's upper bound; NULL above the last,
-- 30 days); a percentile is the upper bound of the bucket that holds it
-- (docs/record-format.md, "Recovery time"); counts and sums stay exact.
CREATE TABLE rollup_recovery (
    minute        TIMESTAMP NOT NULL,  -- the workflow's first-attempt minute
    workflow_name VARCHAR,
    outcome       VARCHAR   NOT NULL,  -- retry_recovery | fallback_recovery
    le_us         BIGINT,
    workflows     BIGINT    NOT NULL,
    sum_us        HUGEINT   NOT NULL
);
CREATE TABLE total_recovery AS SELECT * EXCLUDE (minute) FROM rollup_recovery;

-- Stored workflows get their histogram at the next open.
UPDATE derived_state SET stale = true;
