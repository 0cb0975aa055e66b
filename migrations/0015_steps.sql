-- What `tune` reads (docs/record-format.md, "Tuning recovery"), and the
-- audit's limits per layer and route: every attempt
-- of each workflow that made more than one, in the workflow's order, with
-- what the value-of-a-retry curve groups by and what a replay of a stricter
-- policy needs to decide where it would have stopped. A workflow with one
-- attempt has no row: no policy can remove its only attempt. Workflow-level
-- columns are repeated on each row so a read needs no join with the facts.
CREATE TABLE workflow_steps (
    workflow_id              VARCHAR   NOT NULL,
    first_at                 TIMESTAMP NOT NULL,
    workflow_name            VARCHAR,
    attempts                 BIGINT    NOT NULL, -- the workflow's
    outcome                  VARCHAR   NOT NULL, -- the workflow's
    delivered_seq            BIGINT,             -- the workflow's delivered attempt
    outcome_ms               DOUBLE    NOT NULL, -- the workflow's time to outcome
    primary_route            VARCHAR   NOT NULL, -- the workflow's primary route key
    seq                      BIGINT    NOT NULL, -- this attempt's position, from 1
    attempt_minute           TIMESTAMP NOT NULL,
    offset_ms                DOUBLE    NOT NULL, -- start after the first attempt's start
    duration_ms              DOUBLE    NOT NULL, -- 0 when not reported
    end_before_ms            DOUBLE,             -- latest end of the attempts before; NULL at seq 1
    layer                    VARCHAR   NOT NULL,
    route_key                VARCHAR   NOT NULL, -- route group, or provider/model, lowercase
    effective_route          VARCHAR   NOT NULL, -- primary | fallback
    retry                    BOOLEAN   NOT NULL, -- the same route key as the attempt before
    layer_retry              BIGINT,             -- a retry's number among its layer's in one call of the layers outside it
    route_attempt            BIGINT    NOT NULL, -- this attempt's number on its route key
    status                   VARCHAR   NOT NULL,
    error_class              VARCHAR,            -- NULL when ok; 'unknown' when unclassified
    after_class              VARCHAR,            -- the previous attempt's class, 'none' if it did not fail
    deliverable              BOOLEAN   NOT NULL,
    decision                 VARCHAR,
    commit_marker            VARCHAR,            -- committed | unknown | visible_output | NULL
    first_fallback           BOOLEAN   NOT NULL, -- the workflow's first attempt on a fallback route, after its first
    from_fallback            BOOLEAN   NOT NULL, -- that attempt or one after it
    fallback_layer           VARCHAR,            -- from_fallback: the first fallback's layer
    fallback_class           VARCHAR,            -- from_fallback: the first fallback's after_class
    served_provider          VARCHAR   NOT NULL,
    served_model             VARCHAR   NOT NULL,
    cost_kind                VARCHAR   NOT NULL,
    input_tokens             HUGEINT   NOT NULL,
    output_tokens            HUGEINT   NOT NULL,
    cached_input_tokens      HUGEINT   NOT NULL,
    cache_write_input_tokens HUGEINT   NOT NULL,
    emitter_cost_pusd        HUGEINT   NOT NULL
);

-- Each workflow's time to outcome: from its first attempt's start to the
-- end of its delivered attempt, or of its last-ending attempt.
ALTER TABLE workflow_facts ADD COLUMN outcome_ms DOUBLE;

-- Stored workflows get their steps at the next open.
UPDATE derived_state SET stale = true;
