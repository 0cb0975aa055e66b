-- Attempts found by the call, not only by parentage (docs/record-format.md,
-- "Attempts found by the call"): grouping a trace's spans into calls reads,
-- besides each span's parent, its interval, host, call id, requested model
-- and resend count. They are kept beside the span as JSON (`SpanFacts`), so
-- a trace's shape is still read without decoding its spans. Spans stored
-- before this migration have none: the deriver reads them from the span.
ALTER TABLE spans ADD COLUMN facts VARCHAR;

-- Per trace, what its shape could not account for, as of its stored spans:
-- HTTP client spans whose model span never arrived, and calls whose
-- neighbouring HTTP spans could belong to another call too. Only traces
-- with either are listed; /metrics sums them.
CREATE TABLE trace_gaps (
    trace_id             VARCHAR NOT NULL,
    orphan_attempt_spans BIGINT  NOT NULL,
    ambiguous_calls      BIGINT  NOT NULL
);
