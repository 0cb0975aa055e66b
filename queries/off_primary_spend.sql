-- off_primary_spend.sql: each of the window's attempt groups off the
-- primary route priced once, as served and at the primary's price, for
-- fallback_costs.sql and circuits.sql (pricing them in each query cost
-- each query's planning milliseconds: docs/performance.md).
-- Not a report itself: it fills temp.off_primary_spend (created empty by
-- off_primary_rows.sql) and drops temp.off_primary_rows.
-- Parameters: none.
-- Reads: temp.off_primary_rows (off_primary_rows.sql), temp.prices (the
--   stored keys and the primaries' keys, store::queries::price_primaries)
--   and the macros of cost.sql.
-- Columns of temp.off_primary_spend:
--   workflow_id, served_provider, served_model, cost_kind, attempts
--   cost_pusd        the known cost (cost.sql's known_cost_of)
--   unknown_reason   why the cost is unknown (NULL: known)
--   primary_pusd     the same tokens at the primary's price on their day,
--                    tier, prompt size and account (NULL: the primary has
--                    no price for them)
INSERT INTO temp.off_primary_spend
SELECT workflow_id, served_provider, served_model, cost_kind, attempts, primary_pusd,
       known_cost_of(cost_kind, emitter_cost_pusd, priced) AS cost_pusd,
       unknown_reason_of(cost_kind, price, unpriced, priced) AS unknown_reason
FROM (
    SELECT r.workflow_id, r.served_provider, r.served_model, r.cost_kind, r.attempts, r.emitter_cost_pusd,
           p.price, p.unpriced,
           priced_tokens(r, p.price) AS priced,
           priced_tokens(r, q.price) AS primary_pusd
    FROM temp.off_primary_rows r
    LEFT JOIN temp.prices p
      ON p.served_provider = r.served_provider AND p.served_model = r.served_model
     AND p.price_key IS NOT DISTINCT FROM r.price_key
    LEFT JOIN temp.prices q
      ON q.served_provider = r.primary_provider AND q.served_model = r.primary_model
     AND q.price_key IS NOT DISTINCT FROM r.price_key
);
DROP TABLE temp.off_primary_rows;
