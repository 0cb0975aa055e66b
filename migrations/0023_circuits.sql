-- Breaker state changes as gateways and callers reported them
-- (docs/record-format.md, "Breaker timelines"): JSONL records of
-- "type": "circuit" and OTLP circuit.state_change events. Attempts that
-- carry `circuit` are read where they are stored; queries/circuits.sql
-- joins both into each route's timeline when a report asks, so nothing here
-- is derived and a write stores a change in one row.
CREATE TABLE circuit_changes (
    change_id         VARCHAR   NOT NULL PRIMARY KEY,  -- hash of every field: a redelivery is stored once
    changed_at        TIMESTAMP NOT NULL,
    provider          VARCHAR   NOT NULL,              -- canonical name (the alias table)
    provider_received VARCHAR   NOT NULL,              -- as the emitter spelled it
    model             VARCHAR,                          -- the route: model, or
    route_group       VARCHAR,                          -- the group, which wins when both are given
    workflow_name     VARCHAR,                          -- the caller whose breaker it is; NULL: every caller
    state             VARCHAR   NOT NULL,              -- closed | open | half_open
    reason            VARCHAR,
    ingest_seq        BIGINT    NOT NULL
);

-- What a fallback cost is read from a workflow's spend rows: off_primary
-- marks those sent to a route other than its primary (same route key rule
-- as everywhere: the group when there is one). Filled by the rebuild the
-- stale mark asks for.
ALTER TABLE workflow_spend ADD COLUMN off_primary BOOLEAN;
UPDATE derived_state SET stale = true;
