-- The fact table: one row per network attempt (docs/record-format.md, "Fields").
-- No primary key or unique index: DuckDB maintains them row by row and they
-- slow bulk appends several times over. The writer deduplicates on
-- attempt_id instead (store/writer.rs), inside the batch's transaction.
CREATE TABLE attempts (
    attempt_id          VARCHAR   NOT NULL,
    workflow_id         VARCHAR   NOT NULL,
    started_at          TIMESTAMP NOT NULL,  -- UTC, microseconds
    provider            VARCHAR   NOT NULL,  -- requested route
    model               VARCHAR   NOT NULL,
    status              VARCHAR   NOT NULL,  -- ok | error
    attempt             BIGINT,              -- order across layers, when the emitter knew it
    workflow            VARCHAR,             -- the workflow's name / policy
    layer               VARCHAR   NOT NULL,  -- sdk | gateway | app | queue
    route               VARCHAR,             -- primary | fallback, as the emitter said
    served_provider     VARCHAR   NOT NULL,  -- who answered: the cost ledger charges these
    served_model        VARCHAR   NOT NULL,
    provider_request_id VARCHAR,
    duration_ms         DOUBLE,
    ttft_ms             DOUBLE,
    http_status         INTEGER,
    error_class         VARCHAR,             -- explicit or derived (classify.rs)
    error_code          VARCHAR,
    retry_after_ms      DOUBLE,
    input_tokens        BIGINT,              -- includes cached input
    output_tokens       BIGINT,
    cached_input_tokens BIGINT,
    cost_pusd           BIGINT,              -- emitter's cost, pico-USD; NULL = price it
    commit_state        VARCHAR   NOT NULL,
    visible_output      BOOLEAN,
    decision            VARCHAR,
    circuit             VARCHAR,
    extra               VARCHAR,             -- unknown fields, a JSON object
    ingested_at         TIMESTAMP NOT NULL DEFAULT current_timestamp
);
