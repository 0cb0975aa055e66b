-- cost.sql: what attempts cost, in one place (docs/record-format.md, "Cost").
-- Not a report: it defines the macros that scope.sql (groups of attempts)
-- and workflow.sql (one workflow's attempts) price with, so both apply the
-- same rule. facts.sql decides each attempt's cost_kind.
-- Parameters: of known_cost_pusd, cost_kind (emitter | free | unknown |
--   priced), the emitter's cost, the four token counts, and the served
--   model's prices per token (pico-USD; NULL when it has none).
-- Columns: none (it defines macros). known_cost_pusd is the known cost in pico-USD:
--   the emitter's, 0 for a free failure, the priced tokens, and 0 where the
--   cost is unknown; cost_is_unknown says when it is (an answer without
--   usage, or priced tokens of a model without a price).
CREATE OR REPLACE TEMP MACRO known_cost_pusd(kind, emitter_pusd, input_tokens, cached_input_tokens,
                                             cache_write_input_tokens, output_tokens,
                                             input_pusd, cached_input_pusd, cache_write_pusd, output_pusd) AS
    -- In 128 bits from the first operation: stored counts are 64-bit, and
    -- a count times a price may pass that.
    coalesce(CASE kind
        WHEN 'emitter' THEN emitter_pusd::HUGEINT
        WHEN 'priced' THEN
             (input_tokens::HUGEINT - cached_input_tokens - cache_write_input_tokens) * input_pusd
           + cached_input_tokens::HUGEINT * cached_input_pusd
           + cache_write_input_tokens::HUGEINT * cache_write_pusd
           + output_tokens::HUGEINT * output_pusd
        ELSE 0 END, 0)::HUGEINT;

CREATE OR REPLACE TEMP MACRO cost_is_unknown(kind, priced_model) AS
    kind = 'unknown' OR (kind = 'priced' AND priced_model IS NULL);
