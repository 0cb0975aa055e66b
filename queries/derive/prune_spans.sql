-- prune_spans.sql: deletes the spans a prune leaves without use: those of
-- the pruned traces, and those received before prune_before that no kept
-- attempt came from (a span still waiting for the rest of its trace is
-- kept); then what was derived from spans that are gone.
-- Parameters: temp.pruned_traces (pruned.sql); the variable prune_before
--   (TIMESTAMP).
-- Columns: none.
DELETE FROM spans
WHERE trace_id IN (SELECT trace_id FROM temp.pruned_traces)
   OR (received_at < getvariable('prune_before')
       AND trace_id NOT IN (SELECT source_trace FROM attempts WHERE source_trace IS NOT NULL));
DELETE FROM trace_spans WHERE trace_id NOT IN (SELECT trace_id FROM spans);
DELETE FROM trace_gaps WHERE trace_id NOT IN (SELECT trace_id FROM spans);
DROP TABLE temp.pruned;
DROP TABLE temp.pruned_traces;
