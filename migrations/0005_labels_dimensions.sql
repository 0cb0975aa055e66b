-- Bounded labels and user dimensions (ARCHITECTURE.md, "Derived tables").
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

-- The rollups fold labels from now on: derive them again.
UPDATE derived_state SET stale = true;
