-- Per-workflow recovery findings: the attempts that broke a recovery rule,
-- by kind and by the error class or commit state that made them one
-- (queries/facts.sql derives them with the other facts; queries/audit.sql
-- applies the policy when reading). Sparse: a workflow that broke no rule
-- has no row, so an audit reads far less than the facts.
CREATE TABLE workflow_findings (
    workflow_id              VARCHAR   NOT NULL,
    first_at                 TIMESTAMP NOT NULL,
    workflow_name            VARCHAR,
    kind                     VARCHAR   NOT NULL,
    class                    VARCHAR   NOT NULL,
    layer                    VARCHAR   NOT NULL,
    served_provider          VARCHAR   NOT NULL,
    served_model             VARCHAR   NOT NULL,
    cost_kind                VARCHAR   NOT NULL,
    attempts                 BIGINT    NOT NULL,
    input_tokens             HUGEINT   NOT NULL,
    output_tokens            HUGEINT   NOT NULL,
    cached_input_tokens      HUGEINT   NOT NULL,
    cache_write_input_tokens HUGEINT   NOT NULL,
    emitter_cost_pusd        HUGEINT   NOT NULL
);

-- Stored workflows get their findings at the next open.
UPDATE derived_state SET stale = true;
