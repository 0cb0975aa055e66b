-- rules.sql: the record format's rules (docs/record-format.md), each written
-- once, as SQL that DuckDB, Spark SQL and ClickHouse read alike. The
-- templates beside this file call a rule as {{name(arg, ...)}}, each
-- argument an expression of their own dialect; attempt_core::sql_rules
-- renders them into queries/facts.sql, queries/lake/dedup.sql,
-- queries/lake/spark/report.sql and queries/lake/clickhouse/report.sql,
-- which are committed, so a rule's change shows in each engine's diff
-- (tests/it/snapshots.rs checks each is its template's render;
-- ATTEMPT_LEDGER_RENDER=1 writes them: docs/testing.md).
-- Parameters: each rule's own, written $name in its body.
-- Columns: none: a rule is an expression (or an ORDER BY list), written to
--   bind as one wherever it lands.

-- rule: attempt_order(attempt, started_at, status, attempt_id)
-- Order in a workflow: attempt NULLS LAST, started_at, then status (at equal
-- order and start, as second-resolution gateway logs have, a failure sorts
-- before a success), then attempt_id.
$attempt ASC NULLS LAST, $started_at, $status, $attempt_id

-- rule: deliverable(status, decision)
-- An attempt that could be the answer: it succeeded and its caller did not
-- go on to retry or fall back (the first such attempt is the delivered one).
coalesce($status = 'ok' AND ($decision IS NULL OR $decision NOT IN ('retry', 'fallback')), false)

-- rule: same_route(group_a, provider_a, model_a, group_b, provider_b, model_b)
-- Two routes are the same when both have a route group and it is the same,
-- or neither has one and provider and model are the same.
CASE WHEN $group_a IS NOT NULL OR $group_b IS NOT NULL THEN coalesce($group_a = $group_b, false)
     ELSE $provider_a = $provider_b AND $model_a = $model_b END

-- rule: effective_route(route, group, provider, model, primary_group, primary_provider, primary_model)
-- An attempt's route: its explicit `route` field, else primary when it is on
-- its workflow's primary route, else fallback.
coalesce($route, CASE WHEN {{same_route($group, $provider, $model, $primary_group, $primary_provider, $primary_model)}}
                      THEN 'primary' ELSE 'fallback' END)

-- rule: outcome(delivered_seq, delivered_route, delivered_group, delivered_provider, delivered_model, primary_group, primary_provider, primary_model, last_decision)
-- A workflow's outcome, from its delivered attempt (NULL: none) and its
-- last attempt's decision.
CASE WHEN $delivered_seq = 1 THEN 'primary_success'
     WHEN $delivered_seq IS NOT NULL THEN
          CASE {{effective_route($delivered_route, $delivered_group, $delivered_provider, $delivered_model, $primary_group, $primary_provider, $primary_model)}}
               WHEN 'primary' THEN 'retry_recovery' ELSE 'fallback_recovery' END
     WHEN $last_decision = 'degrade' THEN 'degraded'
     WHEN $last_decision = 'queue' THEN 'queued'
     WHEN $last_decision IN ('retry', 'fallback') THEN 'in_flight'
     ELSE 'fail_closed' END

-- rule: cost_kind(cost_pusd, cost_currency, status, input_tokens, output_tokens, cached_input_tokens, cache_write_input_tokens, web_search_requests)
-- How an attempt's cost is known: the emitter's own figure; a figure in
-- another currency than USD (never converted: unknown); free (a failure
-- that used no tokens and no searches); unknown (a success without usage);
-- else priced from its tokens at the served model's price.
CASE WHEN $cost_pusd IS NOT NULL THEN 'emitter'
     WHEN $cost_currency IS NOT NULL THEN 'other_currency'
     WHEN $status = 'error' AND coalesce($input_tokens, 0) = 0 AND coalesce($output_tokens, 0) = 0
          AND coalesce($cached_input_tokens, 0) = 0 AND coalesce($cache_write_input_tokens, 0) = 0
          AND coalesce($web_search_requests, 0) = 0
          THEN 'free'
     WHEN $status = 'ok' AND $input_tokens IS NULL AND $output_tokens IS NULL
          AND $cached_input_tokens IS NULL AND $cache_write_input_tokens IS NULL
          THEN 'unknown'
     ELSE 'priced' END

-- rule: price_tier(batch, service_tier)
-- The price tier of an attempt (attempt_core::pricing::price_tier): batch
-- when sent through a batch API, else its service tier lower-cased, the
-- names of the standard tier as `standard`.
CASE WHEN coalesce($batch, false) THEN 'batch'
     WHEN $service_tier IS NULL OR lower($service_tier) IN ('', 'default', 'auto', 'standard', 'on_demand')
          THEN 'standard'
     ELSE lower($service_tier) END

-- rule: prompt_over(input_tokens)
-- The largest prompt size a long-context price can start above that the
-- attempt's prompt (all its input) exceeds; 0 for none
-- (attempt_core::pricing::PROMPT_EDGES).
CASE WHEN $input_tokens > 1000000 THEN 1000000
     WHEN $input_tokens > 512000 THEN 512000
     WHEN $input_tokens > 272000 THEN 272000
     WHEN $input_tokens > 256000 THEN 256000
     WHEN $input_tokens > 200000 THEN 200000
     WHEN $input_tokens > 199999 THEN 199999
     WHEN $input_tokens > 128000 THEN 128000
     WHEN $input_tokens > 100000 THEN 100000
     WHEN $input_tokens > 64000 THEN 64000
     WHEN $input_tokens > 32000 THEN 32000
     ELSE 0 END

-- rule: priced_kinds(cost_kind, input_tokens, cached_input_tokens, cache_write_input_tokens, cache_write_1h_input_tokens, output_tokens, reasoning_output_tokens, web_search_requests)
-- The kinds a priced attempt used, a bit each: uncached input 1, cached
-- input 2, five-minute cache writes 4, one-hour cache writes 8, output
-- other than reasoning 16, reasoning 32, web searches 64 (0 for an attempt
-- not priced from its tokens). A kind without a price makes exactly the
-- attempts that used it unknown.
CASE WHEN $cost_kind = 'priced' THEN
     CASE WHEN coalesce($input_tokens, 0) - coalesce($cached_input_tokens, 0) - coalesce($cache_write_input_tokens, 0) > 0
          THEN 1 ELSE 0 END
   + CASE WHEN coalesce($cached_input_tokens, 0) > 0 THEN 2 ELSE 0 END
   + CASE WHEN coalesce($cache_write_input_tokens, 0) - coalesce($cache_write_1h_input_tokens, 0) > 0 THEN 4 ELSE 0 END
   + CASE WHEN coalesce($cache_write_1h_input_tokens, 0) > 0 THEN 8 ELSE 0 END
   + CASE WHEN coalesce($output_tokens, 0) - coalesce($reasoning_output_tokens, 0) > 0 THEN 16 ELSE 0 END
   + CASE WHEN coalesce($reasoning_output_tokens, 0) > 0 THEN 32 ELSE 0 END
   + CASE WHEN coalesce($web_search_requests, 0) > 0 THEN 64 ELSE 0 END
     ELSE 0 END

-- rule: priced_pusd(uncached_input, cached_input, cache_write_5m, cache_write_1h, text_output, reasoning_output, web_searches, price_input, price_cached_input, price_cache_write, price_cache_write_1h, price_output, price_reasoning_output, price_web_search)
-- What tokens cost at a row's prices (pico-USD per token, per search): each
-- kind's count times its price, a kind not used adding 0 whether priced or
-- not; NULL when a kind used has no price (the cost is then unknown). The
-- counts are each kind's own: uncached input (input less cached and
-- cache-written), five-minute writes (writes less one-hour ones), output
-- less reasoning. Callers pass counts in a type wide enough for the
-- products (DuckDB HUGEINT, Spark DECIMAL(38, 0)).
(CASE WHEN $uncached_input = 0 THEN 0 ELSE $uncached_input * $price_input END
 + CASE WHEN $cached_input = 0 THEN 0 ELSE $cached_input * $price_cached_input END
 + CASE WHEN $cache_write_5m = 0 THEN 0 ELSE $cache_write_5m * $price_cache_write END
 + CASE WHEN $cache_write_1h = 0 THEN 0 ELSE $cache_write_1h * $price_cache_write_1h END
 + CASE WHEN $text_output = 0 THEN 0 ELSE $text_output * $price_output END
 + CASE WHEN $reasoning_output = 0 THEN 0 ELSE $reasoning_output * $price_reasoning_output END
 + CASE WHEN $web_searches = 0 THEN 0 ELSE $web_searches * $price_web_search END)

-- rule: unknown_cost_reason(cost_kind, has_price, unpriced, priced)
-- Why an attempt's cost is unknown (NULL: it is known): an answer without
-- usage; a cost stated in another currency; no entry, or no row for its
-- tier or prompt size ($unpriced, the price table's answer; no row at all
-- is no entry); or a kind it used without a price ($priced, the
-- priced_pusd of its tokens, is NULL).
CASE WHEN $cost_kind = 'unknown' THEN 'no_usage'
     WHEN $cost_kind = 'other_currency' THEN 'other_currency'
     WHEN $cost_kind <> 'priced' THEN NULL
     WHEN NOT $has_price THEN coalesce($unpriced, 'no_price')
     WHEN $priced IS NULL THEN 'no_kind_price' END

-- rule: current_revision(source_trace, ingest_seq, newest_seq)
-- Lake dedup, first: a trace's derived attempts are one revision, numbered
-- by the write of its newest spans; of each trace, on the node that derived
-- it, only the newest revision is read ($newest_seq: the largest ingest_seq
-- of the trace on its node). Rows that arrived as attempts are all read.
($source_trace IS NULL OR $ingest_seq = $newest_seq)

-- rule: copy_order()
-- Lake dedup, then: of the copies of one attempt_id (redeliveries to several
-- nodes, an export repeated after a crash), the first stored wins.
ingested_at, ingest_node, ingest_seq
