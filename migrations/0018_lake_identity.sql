-- Who this database is to the lakes it writes (docs/lake.md, "Who writes a
-- lake"): random, made once. A lake binds a node id to the database that
-- first exported under it; a copy of this file (a restored backup) is the
-- same database, a new file under an old node id is another one.
CREATE TABLE database_identity AS
    SELECT uuid()::VARCHAR AS database_id, current_timestamp::TIMESTAMP AS created_at;

-- An export's numbers in the lake are its write numbers plus lake_offset. A
-- database that finds its node's numbers in the lake beyond its own exports
-- (a restored backup, or a node rebuilt under its id) continues after them
-- with a larger offset, never over them. export_id names the export in its
-- files and in the lake's record of it: only the export that wrote a file
-- may write it again (after a crash).
ALTER TABLE lake_exports ADD COLUMN lake_offset BIGINT DEFAULT 0;
ALTER TABLE lake_exports ADD COLUMN export_id VARCHAR;
