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

-- rule: cost_kind(cost_pusd, cost_currency, status, input_tokens, output_tokens, cached_input_tokens, cache_write_input_tokens)
-- How an attempt's cost is known: the emitter's own figure; unknown (a
-- figure in another currency than USD, never converted); free (a failure
-- that used no tokens); unknown (a success without usage); else priced from
-- its tokens at the served model's price.
CASE WHEN $cost_pusd IS NOT NULL THEN 'emitter'
     WHEN $cost_currency IS NOT NULL THEN 'unknown'
     WHEN $status = 'error' AND coalesce($input_tokens, 0) = 0 AND coalesce($output_tokens, 0) = 0
          AND coalesce($cached_input_tokens, 0) = 0 AND coalesce($cache_write_input_tokens, 0) = 0
          THEN 'free'
     WHEN $status = 'ok' AND $input_tokens IS NULL AND $output_tokens IS NULL
          AND $cached_input_tokens IS NULL AND $cache_write_input_tokens IS NULL
          THEN 'unknown'
     ELSE 'priced' END

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
