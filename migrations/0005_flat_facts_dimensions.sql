-- Flat per-workflow spend and latency, bounded labels and user dimensions
-- (ARCHITECTURE.md, "Derived tables").

-- A workflow's attempts grouped as the rollups need them, one row per group
-- (they were a list column of workflow_facts: building those lists cost
-- three times the rest of the derivation). Each row repeats the keys of its
-- workflow that the rollups group by, so summing needs no join; a write
-- replaces all of a workflow's rows with its facts. queries/facts.sql
-- documents the columns.
CREATE TABLE workflow_spend (
    workflow_id              VARCHAR   NOT NULL,
    first_at                 TIMESTAMP NOT NULL,
    workflow_name            VARCHAR,
    outcome                  VARCHAR   NOT NULL,
    dim1                     VARCHAR,
    dim2                     VARCHAR,
    dim3                     VARCHAR,
    attempt_minute           TIMESTAMP NOT NULL,
    layer                    VARCHAR   NOT NULL,
    provider                 VARCHAR   NOT NULL,
    model                    VARCHAR   NOT NULL,
    served_provider          VARCHAR   NOT NULL,
    served_model             VARCHAR   NOT NULL,
    status                   VARCHAR   NOT NULL,
    error_class              VARCHAR,
    retry                    BOOLEAN   NOT NULL,
    delivered                BOOLEAN   NOT NULL,
    cost_kind                VARCHAR   NOT NULL,
    attempts                 BIGINT    NOT NULL,
    input_tokens             HUGEINT   NOT NULL,
    output_tokens            HUGEINT   NOT NULL,
    cached_input_tokens      HUGEINT   NOT NULL,
    cache_write_input_tokens HUGEINT   NOT NULL,
    emitter_cost_pusd        HUGEINT   NOT NULL
);

CREATE TABLE workflow_latency (
    workflow_id   VARCHAR   NOT NULL,
    first_at      TIMESTAMP NOT NULL,
    workflow_name VARCHAR,
    provider      VARCHAR   NOT NULL,
    model         VARCHAR   NOT NULL,
    status        VARCHAR   NOT NULL,
    metric        VARCHAR   NOT NULL,  -- duration | ttft
    le            DOUBLE,              -- bucket upper bound, seconds; NULL: above the last (+Inf)
    observations  BIGINT    NOT NULL,
    sum_us        HUGEINT   NOT NULL
);

ALTER TABLE workflow_facts DROP COLUMN spend;
ALTER TABLE workflow_facts DROP COLUMN latency;
--
-- label_values: the label values that keep rollup rows and series of their
-- own, the first K of each label seen (K: ATTEMPT_LEDGER_LABEL_LIMIT, default
-- 1000). Later values are summed under `other`. State, not derived: a rebuild
-- keeps it, so incremental writes and a rebuild fold the same values.
--   label  workflow | provider | model | route_group | dim1 | dim2 | dim3
CREATE TABLE label_values (
    label VARCHAR NOT NULL,
    value VARCHAR NOT NULL,
    PRIMARY KEY (label, value)
);

-- dimensions: up to three attributes reports can group by
-- (`attempt-ledger dimensions`), each read from a record field or a key of
-- `extra`; slot N fills the columns dimN below.
CREATE TABLE dimensions (
    slot   INTEGER NOT NULL PRIMARY KEY,
    name   VARCHAR NOT NULL UNIQUE,
    source VARCHAR NOT NULL
);

ALTER TABLE workflow_facts ADD COLUMN dim1 VARCHAR;
ALTER TABLE workflow_facts ADD COLUMN dim2 VARCHAR;
ALTER TABLE workflow_facts ADD COLUMN dim3 VARCHAR;
ALTER TABLE rollup_workflows ADD COLUMN dim1 VARCHAR;
ALTER TABLE rollup_workflows ADD COLUMN dim2 VARCHAR;
ALTER TABLE rollup_workflows ADD COLUMN dim3 VARCHAR;
ALTER TABLE rollup_attempts ADD COLUMN dim1 VARCHAR;
ALTER TABLE rollup_attempts ADD COLUMN dim2 VARCHAR;
ALTER TABLE rollup_attempts ADD COLUMN dim3 VARCHAR;
ALTER TABLE total_workflows ADD COLUMN dim1 VARCHAR;
ALTER TABLE total_workflows ADD COLUMN dim2 VARCHAR;
ALTER TABLE total_workflows ADD COLUMN dim3 VARCHAR;
ALTER TABLE total_attempts ADD COLUMN dim1 VARCHAR;
ALTER TABLE total_attempts ADD COLUMN dim2 VARCHAR;
ALTER TABLE total_attempts ADD COLUMN dim3 VARCHAR;

-- Derive everything again in the new shape, folding labels.
UPDATE derived_state SET stale = true;
