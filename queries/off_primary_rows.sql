-- off_primary_rows.sql: the window's attempts off their workflow's primary
-- route, with that primary route: what fallback_costs.sql and circuits.sql
-- price twice (as served, and at the primary's price).
-- Not a report itself: it builds temp.off_primary_rows, from which the
-- store prices the primaries' keys (store::queries::price_primaries) and
-- off_primary_spend.sql fills temp.off_primary_spend, created empty here:
-- a window with no attempt off its primary route (most) plans no pricing.
-- Parameters: none (the scope_* variables and in_window of window.sql).
-- Reads: workflow_spend (its off_primary rows), workflow_facts.
-- The facts are semi-joined to the off-primary rows before the window's
-- filter reads them: filtering every fact of the window first cost a
-- one-hour report 60 ms at 1.17M attempts with no fallback in it.
-- Columns of temp.off_primary_rows: workflow_id, primary_provider,
--   primary_model (the workflow's primary route), and of the spend row:
--   served_provider, served_model, cost_kind, attempts, price_key, the
--   token counts, web_search_requests and emitter_cost_pusd.
-- Columns of temp.off_primary_spend: those of off_primary_spend.sql.
CREATE OR REPLACE TEMP TABLE off_primary_rows AS
SELECT f.workflow_id, f.primary_provider, f.primary_model, s.served_provider, s.served_model, s.cost_kind,
       s.attempts, s.price_key, s.input_tokens, s.cached_input_tokens, s.cache_write_input_tokens,
       s.cache_write_1h_input_tokens, s.output_tokens, s.reasoning_output_tokens, s.web_search_requests,
       s.emitter_cost_pusd
FROM (SELECT * FROM workflow_spend WHERE off_primary) s
JOIN workflow_facts f USING (workflow_id)
WHERE f.workflow_id IN (SELECT workflow_id FROM workflow_spend WHERE off_primary)
  AND in_window(f.first_at, f.workflow_name);

CREATE OR REPLACE TEMP TABLE off_primary_spend (
    workflow_id VARCHAR, served_provider VARCHAR, served_model VARCHAR, cost_kind VARCHAR, attempts BIGINT,
    primary_pusd HUGEINT, cost_pusd HUGEINT, unknown_reason VARCHAR);
