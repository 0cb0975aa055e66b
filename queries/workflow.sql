-- workflow.sql: one workflow, attempt by attempt: the workflow page and
-- GET /api/v1/workflows/{workflow_id}.
-- Parameters: temp.fact_attempts and temp.new_facts (facts.sql run over this
--   one workflow's attempts, so every rule is the derivation's own), the
--   stored columns facts.sql does not carry from temp.fact_input,
--   temp.prices (queries.rs load_prices) and the macros of cost.sql.
-- Columns, one row per attempt in the workflow's order:
--   seq                     1-based position (facts.sql's order)
--   attempt_id, started_us (microseconds since the epoch, UTC), layer,
--   provider, model, route_group,
--   effective_route         primary | fallback (the emitter's, else by route)
--   served_provider, served_model, status, http_status, error_class,
--   error_code, duration_ms, ttft_ms, retry_after_ms, decision,
--   commit_state, visible_output, circuit
--   wait_ms                 from the previous attempt's end (start + duration,
--                           or its start without a duration) to this start;
--                           NULL for the first
--   delivered               this attempt's answer is the one delivered
--   input_tokens, output_tokens, cached_input_tokens, cache_write_input_tokens
--   cost_kind               emitter | free | unknown | other_currency | priced (facts.sql)
--   cost_pusd               pico-USD; NULL when unknown (cost.sql)
--   unknown_reason          why it is unknown (cost.sql's unknown_cost_reason)
--   price_tier              the tier that priced it (standard, flex, batch, ...)
--   cache_write_1h_input_tokens, web_search_requests   as stored
--   workflow_name, outcome, primary_provider, primary_model, primary_route_group,
--   fallback_reason         the workflow's, repeated on every row
SELECT a.seq, a.attempt_id, epoch_us(a.started_at) AS started_us, a.layer, a.provider, a.model, a.route_group, a.effective_route,
       a.served_provider, a.served_model, a.status, i.http_status, a.error_class, i.error_code,
       a.duration_ms, a.ttft_ms, i.retry_after_ms, a.decision, i.commit_state, i.visible_output, i.circuit,
       (epoch_us(a.started_at)
        - lag(epoch_us(a.started_at) + coalesce(a.duration_ms, 0) * 1000) OVER (ORDER BY a.seq)) / 1000.0
           AS wait_ms,
       a.delivered, a.input_tokens, a.output_tokens, a.cached_input_tokens, a.cache_write_input_tokens,
       a.cost_kind,
       unknown_cost_reason(a.cost_kind, coalesce(a.input_tokens, 0), coalesce(a.cached_input_tokens, 0),
                           coalesce(a.cache_write_input_tokens, 0), coalesce(a.cache_write_1h_input_tokens, 0),
                           coalesce(a.output_tokens, 0), coalesce(a.reasoning_output_tokens, 0),
                           coalesce(a.web_search_requests, 0), p.price, p.unpriced) AS unknown_reason,
       CASE WHEN unknown_reason IS NULL
            THEN known_cost_pusd(a.cost_kind, a.cost_pusd, coalesce(a.input_tokens, 0),
                                 coalesce(a.cached_input_tokens, 0), coalesce(a.cache_write_input_tokens, 0),
                                 coalesce(a.cache_write_1h_input_tokens, 0), coalesce(a.output_tokens, 0),
                                 coalesce(a.reasoning_output_tokens, 0), coalesce(a.web_search_requests, 0),
                                 p.price) END AS cost_pusd,
       a.price_key.tier AS price_tier, a.cache_write_1h_input_tokens, a.web_search_requests,
       f.workflow_name, f.outcome, f.primary_provider, f.primary_model, f.primary_route_group, f.fallback_reason
FROM temp.fact_attempts a
JOIN temp.fact_input i ON i.workflow_id = a.workflow_id AND i.attempt_id = a.attempt_id
JOIN temp.new_facts f ON f.workflow_id = a.workflow_id
LEFT JOIN temp.prices p
  ON p.served_provider = a.served_provider AND p.served_model = a.served_model
 AND p.price_key IS NOT DISTINCT FROM a.price_key
ORDER BY a.seq;
