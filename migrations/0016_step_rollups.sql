-- The value-of-each-retry curve (queries/step_rollups.sql) summed by
-- minute and in all, like the report's rollups: `tune` reads a window's
-- whole minutes and the totals here, and only the window's edges from
-- workflow_steps. One row per group of the attempts at positions 2 and
-- later up to each workflow's delivery.
CREATE TABLE rollup_steps (
    minute                   TIMESTAMP NOT NULL, -- the workflow's first-attempt minute
    workflow_name            VARCHAR,
    position                 BIGINT    NOT NULL, -- the attempt's seq; 16 for 16 and later
    and_later                BOOLEAN   NOT NULL, -- seq >= 16
    layer                    VARCHAR   NOT NULL,
    after_class              VARCHAR   NOT NULL,
    primary_route            VARCHAR   NOT NULL, -- the workflow's, folded like the other labels
    first_fallback           BOOLEAN   NOT NULL,
    from_fallback            BOOLEAN   NOT NULL,
    fallback_layer           VARCHAR,
    fallback_class           VARCHAR,
    served_provider          VARCHAR   NOT NULL,
    served_model             VARCHAR   NOT NULL,
    cost_kind                VARCHAR   NOT NULL,
    reached                  BIGINT    NOT NULL, -- attempts at seq <= 16: workflows that reached the position
    delivered                BIGINT    NOT NULL, -- attempts that delivered their workflow
    attempts                 BIGINT    NOT NULL,
    input_tokens             HUGEINT   NOT NULL,
    output_tokens            HUGEINT   NOT NULL,
    cached_input_tokens      HUGEINT   NOT NULL,
    cache_write_input_tokens HUGEINT   NOT NULL,
    emitter_cost_pusd        HUGEINT   NOT NULL,
    added_us                 HUGEINT   NOT NULL, -- time added to time to outcome, whole microseconds
    added_to_outcome_us      HUGEINT   NOT NULL  -- first_fallback rows: from the end before it to the outcome
);
CREATE TABLE total_steps AS SELECT * EXCLUDE (minute) FROM rollup_steps;

-- Stored workflows get their sums, and their steps in workflow order, at
-- the next open.
UPDATE derived_state SET stale = true;
