-- The recovery findings summed by minute, so an audit reads what a report
-- reads: rollups, not rows per workflow (queries/finding_rollups.sql fills
-- them; queries/audit.sql applies the policy to them when reading).

-- An attempt's place among the workflow's attempts was already kept for the
-- budgets; this is the latest start of the attempts before it, so the first
-- attempt past a time budget is found without a window over the workflow.
ALTER TABLE workflow_findings ADD COLUMN prev_offset_ms DOUBLE;

-- The attempts of each finding kind, by class, served route and cost kind
-- (and by place, for kind `attempt`: the attempt budget).
CREATE TABLE rollup_findings (
    minute                   TIMESTAMP NOT NULL,  -- the workflow's first-attempt minute
    workflow_name            VARCHAR,
    kind                     VARCHAR   NOT NULL,
    class                    VARCHAR   NOT NULL,
    served_provider          VARCHAR   NOT NULL,
    served_model             VARCHAR   NOT NULL,
    cost_kind                VARCHAR   NOT NULL,
    seq                      BIGINT,               -- kind `attempt` only
    attempts                 BIGINT    NOT NULL,
    input_tokens             HUGEINT   NOT NULL,
    output_tokens            HUGEINT   NOT NULL,
    cached_input_tokens      HUGEINT   NOT NULL,
    cache_write_input_tokens HUGEINT   NOT NULL,
    emitter_cost_pusd        HUGEINT   NOT NULL
);

-- Workflows by the set of classes each had of a kind: a policy's class
-- list then counts each workflow once, whatever it lists.
CREATE TABLE rollup_finding_sets (
    minute            TIMESTAMP NOT NULL,
    workflow_name     VARCHAR,
    kind              VARCHAR   NOT NULL,
    classes           VARCHAR[] NOT NULL,  -- sorted, distinct
    workflows         BIGINT    NOT NULL,
    workflow_attempts BIGINT    NOT NULL   -- every attempt of those workflows
);

UPDATE derived_state SET stale = true;
