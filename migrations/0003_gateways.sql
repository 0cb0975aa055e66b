-- Gateways (docs/record-format.md): what real emitters send.
--
-- provider / served_provider now hold the canonical provider name (the
-- alias table, prices/providers.toml); the spelling the emitter sent is kept
-- beside them (NULL: the same as the canonical name) so `rebuild` can
-- re-apply an edited alias table. Rows stored before this migration keep
-- their (lower-cased) spelling in both until the store re-applies the
-- aliases right after migrating.
ALTER TABLE attempts ADD COLUMN provider_received VARCHAR;
ALTER TABLE attempts ADD COLUMN served_provider_received VARCHAR;
UPDATE attempts SET provider_received = provider, served_provider_received = served_provider;

-- The caller's logical model when a gateway balances it over deployments
-- (LiteLLM's model_group): routes compare by it when present.
ALTER TABLE attempts ADD COLUMN route_group VARCHAR;
-- The part of input_tokens written into a prompt cache (billed at a premium).
ALTER TABLE attempts ADD COLUMN cache_write_input_tokens BIGINT;
-- A hash of the record's mapped fields: a redelivery with the same id and a
-- different fingerprint is a conflict. NULL for rows stored before.
ALTER TABLE attempts ADD COLUMN fingerprint UBIGINT;
-- The OTLP trace whose stored spans this attempt was derived from; NULL for
-- records that arrived as attempts. A trace's attempts are replaced whenever
-- it gets new spans.
ALTER TABLE attempts ADD COLUMN source_trace VARCHAR;

-- OTLP spans as received (the attributes the mapping reads; never message
-- text), so a trace's attempts can be derived again when more of its spans
-- arrive in a later export. Keyed by (trace_id, span_id); the writer keeps the
-- first copy.
CREATE TABLE spans (
    trace_id       VARCHAR   NOT NULL,  -- hex
    span_id        VARCHAR   NOT NULL,  -- hex
    parent_span_id VARCHAR,             -- hex; NULL for a root
    kind           VARCHAR   NOT NULL,  -- model | http | link (ancestry only)
    span           BLOB,                -- protobuf opentelemetry.proto.trace.v1.Span, filtered; NULL for link
    received_at    TIMESTAMP NOT NULL DEFAULT current_timestamp
);
