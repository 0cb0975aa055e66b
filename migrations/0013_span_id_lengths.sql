-- OTLP ids are checked when received (trace ids of 16 bytes, span ids of
-- 8): the attempt id of a span, its two ids in hex one after the other,
-- then names one pair. Spans stored before the check may have other
-- lengths, and there `aabbcc` + `ddeeff0011` and `aabbccdd` + `eeff0011`
-- named one attempt. Their attempts are now named `<trace>:<span>`
-- (`span_attempt_id`): the old ones are removed and their traces queued for
-- derivation again, as if their spans had just arrived, so the next round
-- derives every call of them under the new ids.
CREATE TEMP TABLE odd_traces AS
SELECT DISTINCT trace_id FROM spans WHERE length(trace_id) <> 32 OR length(span_id) <> 16;

DELETE FROM attempts
WHERE attempt_id IN (
    SELECT s.trace_id || s.span_id FROM spans s
    WHERE s.trace_id IN (SELECT trace_id FROM temp.odd_traces)
);

CREATE TEMP TABLE requeue AS
SELECT greatest(coalesce((SELECT max(ingest_seq) FROM attempts), 0),
                coalesce((SELECT max(ingest_seq) FROM spans), 0)) + 1 AS seq;

UPDATE spans SET ingest_seq = (SELECT seq FROM temp.requeue)
WHERE trace_id IN (SELECT trace_id FROM temp.odd_traces);

UPDATE trace_spans
SET first_seq = (SELECT seq FROM temp.requeue), last_seq = (SELECT seq FROM temp.requeue)
WHERE trace_id IN (SELECT trace_id FROM temp.odd_traces);

DROP TABLE temp.requeue;
DROP TABLE temp.odd_traces;
