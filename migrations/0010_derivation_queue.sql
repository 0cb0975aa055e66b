-- Derivation leaves the acknowledgement (docs/record-format.md, "When a
-- report sees a write"): a write stores attempts and spans and commits; a
-- derivation round derives the workflows and traces they touched later, in
-- its own transaction.
--
-- Every write's rows carry the write's number. Numbers grow with each commit
-- (one writer), so "what is not derived yet" is every row numbered above
-- derived_state.derived_seq: the queue is persisted in the very rows it
-- points at, committed with them, and a crash loses no pending derivation.
-- Rows are appended in number order, so DuckDB's zone maps find the pending
-- ones by reading the newest row groups only. Rows stored before this
-- migration are numbered 0: the derived tables already reflect them.
ALTER TABLE attempts ADD COLUMN ingest_seq BIGINT DEFAULT 0;
ALTER TABLE spans ADD COLUMN ingest_seq BIGINT DEFAULT 0;
ALTER TABLE derived_state ADD COLUMN derived_seq BIGINT DEFAULT 0;
UPDATE derived_state SET derived_seq = 0;

-- Per trace: the first and last write number of its spans, and how many it
-- holds (at most MAX_SPANS_PER_TRACE). Lookups of a trace's spans read only
-- the row groups between the two numbers, not the whole history.
CREATE TABLE trace_spans (
    trace_id  VARCHAR NOT NULL,
    first_seq BIGINT  NOT NULL,
    last_seq  BIGINT  NOT NULL,
    spans     BIGINT  NOT NULL
);
INSERT INTO trace_spans SELECT trace_id, 0, 0, count(*) FROM spans GROUP BY trace_id;

-- Workflows whose derivation failed (a value no rule can handle): set aside
-- with the error, so everyone else's derivation goes on. The derived tables
-- leave them out; `rebuild` tries them again. A workflow is listed once.
CREATE TABLE quarantine (
    workflow_id    VARCHAR   NOT NULL,
    error          VARCHAR   NOT NULL,
    attempts       BIGINT    NOT NULL,
    quarantined_at TIMESTAMP NOT NULL DEFAULT current_timestamp
);
