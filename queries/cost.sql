-- cost.sql: what attempts cost, in one place (docs/prices.md). Rendered
-- from queries/rules/cost.template.sql with the rules of
-- queries/rules/rules.sql (facts.sql and the lake's Spark and ClickHouse
-- reports apply the same ones): edit those, then render (docs/testing.md,
-- "Rules"). Not a report: it defines the macros every query that prices
-- reads (scope.sql for groups of attempts, workflow.sql and reconcile for
-- single ones, tune, audit, circuits), so all apply the same rule.
--
-- Parameters: of the macros,
--   kind       the attempts' cost_kind (emitter | free | unknown |
--              other_currency | priced; facts.sql decides it)
--   emitter    the emitters' own cost, pico-USD
--   input, cached, cw, cw1h, output, reasoning, searches
--              the attempts' token counts as the record states them (input
--              all input, cw all cache writes, output all output) and web
--              searches
--   price      the temp.prices row's price STRUCT(input, cached_input,
--              cache_write, cache_write_1h, output, reasoning_output,
--              web_search), pico-USD per token (per search); NULL when the
--              table has none for the attempts' key
--   unpriced   the temp.prices row's reason it has no price (no_price |
--              no_tier_price); NULL with a price, or with no row at all
--   started_at, batch, service_tier, input_tokens, billing_account
--              what price_key_of reads of one attempt
-- Columns: none (it defines macros). known_cost_pusd is the known cost in
--   pico-USD: the emitter's, 0 for a free failure, the priced tokens, and 0
--   where the cost is unknown; unknown_cost_reason says when and why it is
--   unknown (no_usage | other_currency | no_price | no_tier_price |
--   no_kind_price; NULL when known).

-- The price key of one attempt, as facts.sql keys its rows.
CREATE OR REPLACE TEMP MACRO price_key_of(started_at, batch, service_tier, input_tokens, billing_account) AS
    {'day': started_at::DATE, 'tier': CASE WHEN coalesce(batch, false) THEN 'batch'
                                           WHEN service_tier IS NULL OR lower(service_tier) IN ('', 'default', 'auto', 'standard', 'on_demand')
                                                THEN 'standard'
                                           ELSE lower(service_tier) END,
     'over': (CASE WHEN input_tokens > 1000000 THEN 1000000
                   WHEN input_tokens > 512000 THEN 512000
                   WHEN input_tokens > 272000 THEN 272000
                   WHEN input_tokens > 256000 THEN 256000
                   WHEN input_tokens > 200000 THEN 200000
                   WHEN input_tokens > 199999 THEN 199999
                   WHEN input_tokens > 128000 THEN 128000
                   WHEN input_tokens > 100000 THEN 100000
                   WHEN input_tokens > 64000 THEN 64000
                   WHEN input_tokens > 32000 THEN 32000
                   ELSE 0 END)::INTEGER, 'account': billing_account};

-- The price key of a bill's usage fact: its bucket's day, its tier, the
-- prompt size its context window starts above (0: none stated), its
-- account.
CREATE OR REPLACE TEMP MACRO bill_price_key(bucket_start, service_tier, prompt_over, billing_account) AS
    {'day': bucket_start::DATE, 'tier': CASE WHEN coalesce(NULL, false) THEN 'batch'
                                             WHEN service_tier IS NULL OR lower(service_tier) IN ('', 'default', 'auto', 'standard', 'on_demand')
                                                  THEN 'standard'
                                             ELSE lower(service_tier) END,
     'over': coalesce(prompt_over, 0)::INTEGER, 'account': billing_account};

CREATE OR REPLACE TEMP MACRO cost_kind_of(cost_pusd, cost_currency, status, input_tokens, output_tokens,
                                          cached_input_tokens, cache_write_input_tokens, web_search_requests) AS
    CASE WHEN cost_pusd IS NOT NULL THEN 'emitter'
         WHEN cost_currency IS NOT NULL THEN 'other_currency'
         WHEN status = 'error' AND coalesce(input_tokens, 0) = 0 AND coalesce(output_tokens, 0) = 0
              AND coalesce(cached_input_tokens, 0) = 0 AND coalesce(cache_write_input_tokens, 0) = 0
              AND coalesce(web_search_requests, 0) = 0
              THEN 'free'
         WHEN status = 'ok' AND input_tokens IS NULL AND output_tokens IS NULL
              AND cached_input_tokens IS NULL AND cache_write_input_tokens IS NULL
              THEN 'unknown'
         ELSE 'priced' END;

CREATE OR REPLACE TEMP MACRO priced_kinds_of(kind, input_tokens, cached_input_tokens, cache_write_input_tokens,
                                             cache_write_1h_input_tokens, output_tokens, reasoning_output_tokens,
                                             web_search_requests) AS
    (CASE WHEN kind = 'priced' THEN
          CASE WHEN coalesce(input_tokens, 0) - coalesce(cached_input_tokens, 0) - coalesce(cache_write_input_tokens, 0) > 0
               THEN 1 ELSE 0 END
        + CASE WHEN coalesce(cached_input_tokens, 0) > 0 THEN 2 ELSE 0 END
        + CASE WHEN coalesce(cache_write_input_tokens, 0) - coalesce(cache_write_1h_input_tokens, 0) > 0 THEN 4 ELSE 0 END
        + CASE WHEN coalesce(cache_write_1h_input_tokens, 0) > 0 THEN 8 ELSE 0 END
        + CASE WHEN coalesce(output_tokens, 0) - coalesce(reasoning_output_tokens, 0) > 0 THEN 16 ELSE 0 END
        + CASE WHEN coalesce(reasoning_output_tokens, 0) > 0 THEN 32 ELSE 0 END
        + CASE WHEN coalesce(web_search_requests, 0) > 0 THEN 64 ELSE 0 END
          ELSE 0 END)::UTINYINT;

-- In 128 bits from the first operation: stored counts are 64-bit, and a
-- count times a price may pass that.
CREATE OR REPLACE TEMP MACRO priced_pusd(input, cached, cw, cw1h, output, reasoning, searches, price) AS
    CASE WHEN price IS NOT NULL THEN
         (CASE WHEN (input::HUGEINT - cached - cw) = 0 THEN 0 ELSE (input::HUGEINT - cached - cw) * price.input END
          + CASE WHEN cached::HUGEINT = 0 THEN 0 ELSE cached::HUGEINT * price.cached_input END
          + CASE WHEN (cw::HUGEINT - cw1h) = 0 THEN 0 ELSE (cw::HUGEINT - cw1h) * price.cache_write END
          + CASE WHEN cw1h::HUGEINT = 0 THEN 0 ELSE cw1h::HUGEINT * price.cache_write_1h END
          + CASE WHEN (output::HUGEINT - reasoning) = 0 THEN 0 ELSE (output::HUGEINT - reasoning) * price.output END
          + CASE WHEN reasoning::HUGEINT = 0 THEN 0 ELSE reasoning::HUGEINT * price.reasoning_output END
          + CASE WHEN searches::HUGEINT = 0 THEN 0 ELSE searches::HUGEINT * price.web_search END) END;

-- priced_pusd of a row that holds the stored token columns by their names:
-- `priced_tokens(g, price)`, `g` a table alias, read as a struct whose
-- fields DuckDB plans as plain column reads.
CREATE OR REPLACE TEMP MACRO priced_tokens(r, price) AS
    priced_pusd(r.input_tokens, r.cached_input_tokens, r.cache_write_input_tokens, r.cache_write_1h_input_tokens,
                r.output_tokens, r.reasoning_output_tokens, r.web_search_requests, price);

-- The rows of `rows` (a table or a query's CTE with the stored token
-- columns, served_provider, served_model and price_key) with their
-- temp.prices row's price, unpriced, region_dropped and as_of, and
-- `priced`: priced once, for queries that read both the known cost and why
-- it is unknown.
CREATE OR REPLACE TEMP MACRO priced_rows(rows) AS TABLE
    SELECT r.*, p.price, p.unpriced, p.region_dropped, p.as_of, priced_tokens(r, p.price) AS priced
    FROM query_table(rows) r
    LEFT JOIN temp.prices p
      ON p.served_provider = r.served_provider AND p.served_model = r.served_model
     AND p.price_key IS NOT DISTINCT FROM r.price_key;

-- The known cost and why a cost is unknown, from `priced` (priced_pusd's
-- answer for the attempts' tokens): a query that needs both computes
-- priced_pusd once, in a subquery, and reads both from it (planning the
-- price arithmetic twice in every such query cost a report's process
-- milliseconds each: docs/performance.md).
CREATE OR REPLACE TEMP MACRO known_cost_of(kind, emitter, priced) AS
    coalesce(CASE kind WHEN 'emitter' THEN emitter::HUGEINT WHEN 'priced' THEN priced ELSE 0 END, 0)::HUGEINT;

CREATE OR REPLACE TEMP MACRO unknown_reason_of(kind, price, unpriced, priced) AS
    CASE WHEN kind = 'unknown' THEN 'no_usage'
         WHEN kind = 'other_currency' THEN 'other_currency'
         WHEN kind <> 'priced' THEN NULL
         WHEN NOT (price IS NOT NULL) THEN coalesce(unpriced, 'no_price')
         WHEN priced IS NULL THEN 'no_kind_price' END;

CREATE OR REPLACE TEMP MACRO known_cost_pusd(kind, emitter, input, cached, cw, cw1h, output, reasoning, searches,
                                             price) AS
    known_cost_of(kind, emitter, priced_pusd(input, cached, cw, cw1h, output, reasoning, searches, price));

CREATE OR REPLACE TEMP MACRO unknown_cost_reason(kind, input, cached, cw, cw1h, output, reasoning, searches,
                                                 price, unpriced) AS
    unknown_reason_of(kind, price, unpriced,
                      priced_pusd(input, cached, cw, cw1h, output, reasoning, searches, price));

-- The rows of `rows` (as priced_rows reads them, with `attempts` and the
-- emitter's own cost as emitter_cost_pusd) with what a report sums of
-- their cost: cost_pusd, the known cost (an unknown one adds 0 and is
-- counted by its reason instead); unknown_reason; unknown_cost_attempts,
-- their attempts when the cost is unknown; region_unpriced_attempts, those
-- priced by an entry matched only once the served model's region was
-- dropped; and prices_as_of, the as-of day of the prices that priced them.
-- scope.sql reads the rollups' groups through it, `report --lake` the
-- lake's attempts (src/store/lake_report.rs).
CREATE OR REPLACE TEMP MACRO costed_rows(rows) AS TABLE
    SELECT g.* EXCLUDE (price, unpriced, region_dropped, as_of, priced),
           known_cost_of(g.cost_kind, g.emitter_cost_pusd, g.priced) AS cost_pusd,
           unknown_reason_of(g.cost_kind, g.price, g.unpriced, g.priced) AS unknown_reason,
           CASE WHEN unknown_reason IS NOT NULL THEN g.attempts ELSE 0 END AS unknown_cost_attempts,
           CASE WHEN unknown_reason IS NULL AND g.cost_kind = 'priced' AND g.region_dropped THEN g.attempts ELSE 0 END
               AS region_unpriced_attempts,
           CASE WHEN unknown_reason IS NULL AND g.cost_kind = 'priced' THEN g.as_of END AS prices_as_of
    FROM priced_rows(rows) g;
