-- dedup.sql: the lake's attempts, one row each (docs/lake.md, "Reading the
-- lake"), in DuckDB's dialect. Rendered from
-- queries/rules/lake_dedup.template.sql with the rules of
-- queries/rules/rules.sql, which spark/report.sql and clickhouse/report.sql
-- apply too: edit those, then render (docs/testing.md, "Rules").
-- 1. A trace's derived attempts are one revision, numbered by the write of
--    its newest spans (ingest_seq): of each trace, on the node that
--    derived it, only the newest revision is read. Rows that arrived as
--    attempts (source_trace NULL) are all read.
-- 2. Of the copies of one attempt_id (redeliveries to several nodes, an
--    export repeated after a crash), the first stored wins: by ingested_at,
--    then ingest_node, then ingest_seq. A single node keeps the first copy
--    it stored in just this way.
-- Parameters: temp.lake_rows, the lake's rows to read (with the partition
--   columns day and bucket of their paths).
-- Columns of temp.lake_attempts: those of temp.lake_rows.
CREATE OR REPLACE TEMP TABLE lake_attempts AS
WITH current_revision AS (
    SELECT * FROM temp.lake_rows
    QUALIFY (source_trace IS NULL OR ingest_seq = max(ingest_seq) OVER (PARTITION BY source_trace, ingest_node))
)
SELECT * FROM current_revision
QUALIFY row_number() OVER (PARTITION BY attempt_id ORDER BY ingested_at, ingest_node, ingest_seq) = 1;
