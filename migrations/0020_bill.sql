-- The bill (docs/reconcile.md). Attempts gain the provider account they
-- were billed to and the service tier; older rows have neither (NULL).
-- The provider's side is kept as its exports gave it: every bucket an
-- import covered (an empty bucket says the provider billed nothing then),
-- and the facts in them. A source's stored buckets never overlap: an
-- import first deletes the buckets of its source that overlap its own,
-- with their facts, so re-importing a window replaces it.
ALTER TABLE attempts ADD COLUMN billing_account VARCHAR;
ALTER TABLE attempts ADD COLUMN service_tier VARCHAR;

CREATE TABLE bill_buckets (
    source       VARCHAR NOT NULL,
    provider     VARCHAR NOT NULL,
    bucket_start TIMESTAMP NOT NULL,
    bucket_end   TIMESTAMP NOT NULL,
    imported_at  TIMESTAMP NOT NULL DEFAULT now()::TIMESTAMP
);

CREATE TABLE bill_facts (
    source                   VARCHAR NOT NULL,
    provider                 VARCHAR NOT NULL,
    bucket_start             TIMESTAMP NOT NULL,
    bucket_end               TIMESTAMP NOT NULL,
    -- usage | token_cost | other_cost
    kind                     VARCHAR NOT NULL,
    billing_account          VARCHAR,
    api_key_id               VARCHAR,
    model                    VARCHAR,
    service_tier             VARCHAR,
    detail                   VARCHAR,
    requests                 BIGINT,
    input_tokens             BIGINT,
    cached_input_tokens      BIGINT,
    cache_write_input_tokens BIGINT,
    output_tokens            BIGINT,
    currency                 VARCHAR,
    -- pico-units (10^-12) of the currency
    amount_pico              HUGEINT
);
