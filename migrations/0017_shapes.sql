-- Replays by shape (docs/record-format.md, "Tuning recovery"). A retried
-- workflow's shape is what the limits that read only its attempts in order
-- see of it: each attempt's layer, route key, effective route, error class,
-- deliverability, decision and commit marker, its length and its recorded
-- outcome. Workflows of one shape replay alike under those limits, so a
-- replay decides once per shape and sums these tables, not the attempts.
--
-- shape_key is a hash of the shape (queries/facts.sql). shape_steps keeps
-- each shape itself once; two shapes that ever shared a key show there as
-- two rows at one position and are replayed workflow by workflow.
ALTER TABLE workflow_steps ADD COLUMN shape_key UBIGINT;
-- NULL for a workflow with one attempt.
ALTER TABLE workflow_facts ADD COLUMN shape_key UBIGINT;

-- One row per workflow with more than one attempt: what a replay that
-- changes it reads to time it (its attempts' starts after the first's and
-- durations, in order), apart from the facts so that read touches only
-- the retried workflows.
CREATE TABLE workflow_times (
    workflow_id       VARCHAR   NOT NULL,
    first_at          TIMESTAMP NOT NULL,
    workflow_name     VARCHAR,
    shape_key         UBIGINT   NOT NULL,
    outcome_ms        DOUBLE    NOT NULL,
    step_offsets_ms   DOUBLE[]  NOT NULL,
    step_durations_ms DOUBLE[]  NOT NULL
);

-- Every shape of a stored workflow, position by position (queries/shapes.sql).
CREATE TABLE shape_steps (
    shape_key       UBIGINT NOT NULL,
    length          BIGINT  NOT NULL, -- the shape's attempts
    outcome         VARCHAR NOT NULL, -- the shape's recorded outcome
    seq             BIGINT  NOT NULL, -- this position, from 1
    layer           VARCHAR NOT NULL,
    route           INTEGER NOT NULL, -- its route key's place among the shape's, from 0 in order of first use
    route_key       VARCHAR NOT NULL,
    effective_route VARCHAR NOT NULL,
    error_class     VARCHAR,
    deliverable     BOOLEAN NOT NULL,
    decision        VARCHAR,
    commit_marker   VARCHAR
);

-- Each shape's attempts over all time, by position, workflow name (folded
-- like the other labels) and served model: what a replay prices. Kept by
-- every write with MERGE, not rewritten whole like the smaller totals.
CREATE TABLE total_shapes (
    workflow_name            VARCHAR,
    shape_key                UBIGINT NOT NULL,
    seq                      BIGINT  NOT NULL,
    served_provider          VARCHAR NOT NULL,
    served_model             VARCHAR NOT NULL,
    cost_kind                VARCHAR NOT NULL,
    attempts                 BIGINT  NOT NULL, -- one per workflow of the shape
    input_tokens             HUGEINT NOT NULL,
    output_tokens            HUGEINT NOT NULL,
    cached_input_tokens      HUGEINT NOT NULL,
    cache_write_input_tokens HUGEINT NOT NULL,
    emitter_cost_pusd        HUGEINT NOT NULL
);

-- Stored workflows get their shapes at the next open.
UPDATE derived_state SET stale = true;
