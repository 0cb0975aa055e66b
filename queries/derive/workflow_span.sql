-- workflow_span.sql: what a rebuild cuts into slabs: every stored workflow
-- outside quarantine, with its earliest and latest attempt and how many it
-- has. A workflow with a start this build cannot read as an instant (a row
-- written past the decode bounds) is quarantined rather than failing the
-- whole rebuild.
-- Parameters: the variables readable_from_us and readable_until_us
--   (BIGINT: the first and last instant attempt-ledger reads, microseconds
--   since the epoch).
-- Columns of temp.workflow_span: workflow_id VARCHAR, earliest TIMESTAMP,
--   last TIMESTAMP, n BIGINT.
CREATE OR REPLACE TEMP TABLE workflow_span AS
SELECT workflow_id, min(started_at) AS earliest, max(started_at) AS last, count(*) AS n
FROM attempts WHERE workflow_id NOT IN (SELECT workflow_id FROM quarantine)
GROUP BY workflow_id;
INSERT INTO quarantine (workflow_id, error, attempts)
SELECT workflow_id,
       'an attempt''s started_at is outside the instants attempt-ledger can read (years -262143 to 262142)',
       n
FROM temp.workflow_span
WHERE epoch_us(earliest) < getvariable('readable_from_us')
   OR epoch_us(last) > getvariable('readable_until_us');
DELETE FROM temp.workflow_span WHERE workflow_id IN (SELECT workflow_id FROM quarantine);
