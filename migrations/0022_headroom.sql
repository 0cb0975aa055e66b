-- Which limit a 429 hit, and the headroom each workflow's attempts saw
-- (docs/record-format.md, "Headroom"; queries/facts.sql documents the
-- columns).
--
-- limit_kind keys the spend rows and their rollups: NULL but for attempts of
-- class rate_limit, which carry requests | tokens | input_tokens |
-- output_tokens | unknown.
ALTER TABLE workflow_spend ADD COLUMN limit_kind VARCHAR;
ALTER TABLE rollup_attempts ADD COLUMN limit_kind VARCHAR;
ALTER TABLE total_attempts ADD COLUMN limit_kind VARCHAR;

-- Per workflow, served route, billing account and kind: what its attempts
-- said remained (none of the rollups' sums: a minimum and a last value do
-- not add, so a report reads these rows of its window's workflows, which
-- exist only for attempts that stated headroom or were rate-limited).
CREATE TABLE workflow_headroom (
    workflow_id         VARCHAR   NOT NULL,
    first_at            TIMESTAMP NOT NULL,
    workflow_name       VARCHAR,
    served_provider     VARCHAR   NOT NULL,
    served_model        VARCHAR   NOT NULL,
    billing_account     VARCHAR,
    kind                VARCHAR   NOT NULL,  -- requests | tokens | input_tokens | output_tokens | unknown
    observations        BIGINT    NOT NULL,  -- attempts that stated this kind's remaining
    last_at             TIMESTAMP,           -- the latest of them, and what it stated
    last_remaining      BIGINT,
    last_limit          BIGINT,
    min_ratio           DOUBLE,              -- lowest remaining / limit (NULL: no limit stated)
    min_at              TIMESTAMP,
    below_10pct         BIGINT    NOT NULL,  -- attempts sent with remaining / limit < 0.1
    first_below_10pct_at TIMESTAMP,
    rate_limited        BIGINT    NOT NULL,  -- 429s whose limit kind is this kind
    first_429_at        TIMESTAMP
);

UPDATE derived_state SET stale = true;
