-- Derived state: per-workflow facts and time rollups (ARCHITECTURE.md,
-- "Derived tables"). Each is a pure function of the stored attempts, kept
-- current in the transaction that writes the attempts it depends on, and
-- recomputed by `attempt-ledger rebuild`. The rules that fill them live in
-- queries/facts.sql and queries/rollups.sql; this file declares the shapes.
-- The store fills them for an existing database right after migrating.

-- One row per workflow: everything a report needs about it.
CREATE TABLE workflow_facts (
    workflow_id          VARCHAR   NOT NULL,
    workflow_name        VARCHAR,             -- first non-NULL `workflow` in attempt order
    first_at             TIMESTAMP NOT NULL,  -- start of the first attempt (seq 1)
    earliest_at          TIMESTAMP NOT NULL,  -- earliest start of any attempt (not always seq 1's)
    last_at              TIMESTAMP NOT NULL,  -- latest start of any attempt
    attempts             BIGINT    NOT NULL,
    n_sdk                BIGINT    NOT NULL,
    n_gateway            BIGINT    NOT NULL,
    n_app                BIGINT    NOT NULL,
    n_queue              BIGINT    NOT NULL,
    delivered_at         TIMESTAMP,           -- start of the delivered attempt
    delivered_seq        BIGINT,
    primary_provider     VARCHAR,
    primary_model        VARCHAR,
    primary_route_group  VARCHAR,
    outcome              VARCHAR   NOT NULL,
    fallback_provider    VARCHAR,             -- route of the first fallback attempt; NULL: no fallback
    fallback_model       VARCHAR,
    fallback_route_group VARCHAR,
    fallback_reason      VARCHAR,             -- NULL exactly when the workflow never fell back
    -- Its attempts, grouped by what the reports group by (tokens are kept
    -- by served model and priced when read, so a price change needs no rebuild).
    spend STRUCT(
        attempt_minute TIMESTAMP, layer VARCHAR, provider VARCHAR, model VARCHAR,
        served_provider VARCHAR, served_model VARCHAR, status VARCHAR, error_class VARCHAR,
        retry BOOLEAN, delivered BOOLEAN, cost_kind VARCHAR, attempts BIGINT,
        input_tokens HUGEINT, output_tokens HUGEINT, cached_input_tokens HUGEINT,
        cache_write_input_tokens HUGEINT, emitter_cost_pusd HUGEINT
    )[] NOT NULL,
    -- Latency and time-to-first-token observations, by histogram bucket.
    latency STRUCT(
        provider VARCHAR, model VARCHAR, status VARCHAR, metric VARCHAR, le DOUBLE,
        observations BIGINT, sum_us HUGEINT
    )[] NOT NULL
);

-- Rollups by the minute of each workflow's first attempt: a window reads
-- its whole minutes here and its edge minutes from workflow_facts.
CREATE TABLE rollup_workflows (
    minute               TIMESTAMP NOT NULL,
    workflow_name        VARCHAR,
    primary_provider     VARCHAR,
    primary_model        VARCHAR,
    primary_route_group  VARCHAR,
    outcome              VARCHAR   NOT NULL,
    fallback_provider    VARCHAR,
    fallback_model       VARCHAR,
    fallback_route_group VARCHAR,
    fallback_reason      VARCHAR,
    n_all                BIGINT    NOT NULL,
    n_sdk                BIGINT    NOT NULL,
    n_gateway            BIGINT    NOT NULL,
    n_app                BIGINT    NOT NULL,
    n_queue              BIGINT    NOT NULL,
    workflows            BIGINT    NOT NULL
);

CREATE TABLE rollup_attempts (
    minute                   TIMESTAMP NOT NULL,  -- the workflow's first-attempt minute
    attempt_minute           TIMESTAMP NOT NULL,  -- the attempt's own minute (retry budget)
    workflow_name            VARCHAR,
    outcome                  VARCHAR   NOT NULL,
    layer                    VARCHAR   NOT NULL,
    provider                 VARCHAR   NOT NULL,
    model                    VARCHAR   NOT NULL,
    served_provider          VARCHAR   NOT NULL,
    served_model             VARCHAR   NOT NULL,
    status                   VARCHAR   NOT NULL,
    error_class              VARCHAR,
    retry                    BOOLEAN   NOT NULL,
    delivered                BOOLEAN   NOT NULL,
    cost_kind                VARCHAR   NOT NULL,
    attempts                 BIGINT    NOT NULL,
    input_tokens             HUGEINT   NOT NULL,
    output_tokens            HUGEINT   NOT NULL,
    cached_input_tokens      HUGEINT   NOT NULL,
    cache_write_input_tokens HUGEINT   NOT NULL,
    emitter_cost_pusd        HUGEINT   NOT NULL
);

CREATE TABLE rollup_latency (
    minute       TIMESTAMP NOT NULL,
    provider     VARCHAR   NOT NULL,
    model        VARCHAR   NOT NULL,
    status       VARCHAR   NOT NULL,
    metric       VARCHAR   NOT NULL,  -- duration | ttft
    le           DOUBLE,              -- bucket upper bound, seconds; NULL: above the last (+Inf)
    observations BIGINT    NOT NULL,
    sum_us       HUGEINT   NOT NULL
);

-- All-time totals (the rollups without their minutes), so /metrics and the
-- full report read a few thousand rows whatever the history.
CREATE TABLE total_workflows AS SELECT * EXCLUDE (minute) FROM rollup_workflows;
CREATE TABLE total_attempts AS SELECT * EXCLUDE (minute, attempt_minute) FROM rollup_attempts;
CREATE TABLE total_latency AS SELECT * EXCLUDE (minute) FROM rollup_latency;

-- True while the derived tables do not reflect every stored attempt: from
-- this migration until they are first built, and during a bulk import that
-- derives them in one pass at its end. The store rebuilds them when it
-- opens a database marked stale (an import killed half-way, say).
CREATE TABLE derived_state (stale BOOLEAN NOT NULL);
INSERT INTO derived_state VALUES (true);
