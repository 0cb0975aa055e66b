-- The attempt lake (docs/lake.md): Parquet files other engines read, written
-- from the attempts table by `export` and `serve --lake`.
--
-- The node this database is: every row it exports carries the id, so copies
-- from several nodes can be told apart and deduplicated in the lake. Set on
-- the first export (`--node-id`, or a generated one) and never changed.
CREATE TABLE lake_node (
    node_id    VARCHAR   NOT NULL,
    created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
);
-- One row per export to a lake (the id in its _lake.json): the attempts
-- numbered after from_seq up to through_seq. The row is committed before
-- any file is written and finished only once every file is in place, so
-- an export a crash interrupted is done again over the same numbers, which
-- rewrites the same files with the same content. The lake holds every
-- attempt numbered up to the highest finished through_seq.
CREATE TABLE lake_exports (
    lake_id     VARCHAR   NOT NULL,
    from_seq    BIGINT    NOT NULL,
    through_seq BIGINT    NOT NULL,
    files       BIGINT,
    attempts    BIGINT,
    bytes       BIGINT,
    started_at  TIMESTAMP NOT NULL DEFAULT current_timestamp,
    finished_at TIMESTAMP
);
