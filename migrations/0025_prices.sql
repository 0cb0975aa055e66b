-- Prices as the bill charges them (docs/prices.md): what an attempt is
-- priced by besides its served model.
--
-- Stored per attempt: `batch` (sent through a batch API),
-- `cache_write_1h_input_tokens` (the part of the cache writes that went to
-- a one-hour cache) and `web_search_requests` (searches billed per
-- request). Older attempts stated none (NULL).
ALTER TABLE attempts ADD COLUMN batch BOOLEAN;
ALTER TABLE attempts ADD COLUMN cache_write_1h_input_tokens BIGINT;
ALTER TABLE attempts ADD COLUMN web_search_requests BIGINT;

-- Every table that sums spend keys its rows by what selects a price
-- (queries/rules/rules.sql): price_key, the attempt's day, price tier,
-- prompt size (the largest edge its prompt exceeds) and billing account;
-- priced_kinds, the kinds of tokens its attempts used (a bit each), so
-- that a kind without a price makes exactly those attempts unknown. Each
-- sums the new counts beside the old ones.
ALTER TABLE workflow_spend ADD COLUMN price_key STRUCT(day DATE, tier VARCHAR, over INTEGER, account VARCHAR);
ALTER TABLE workflow_spend ADD COLUMN priced_kinds UTINYINT;
ALTER TABLE workflow_spend ADD COLUMN cache_write_1h_input_tokens BIGINT DEFAULT 0;
ALTER TABLE workflow_spend ADD COLUMN web_search_requests BIGINT DEFAULT 0;
ALTER TABLE rollup_attempts ADD COLUMN price_key STRUCT(day DATE, tier VARCHAR, over INTEGER, account VARCHAR);
ALTER TABLE rollup_attempts ADD COLUMN priced_kinds UTINYINT;
ALTER TABLE rollup_attempts ADD COLUMN cache_write_1h_input_tokens BIGINT DEFAULT 0;
ALTER TABLE rollup_attempts ADD COLUMN web_search_requests BIGINT DEFAULT 0;
ALTER TABLE total_attempts ADD COLUMN price_key STRUCT(day DATE, tier VARCHAR, over INTEGER, account VARCHAR);
ALTER TABLE total_attempts ADD COLUMN priced_kinds UTINYINT;
ALTER TABLE total_attempts ADD COLUMN cache_write_1h_input_tokens HUGEINT DEFAULT 0;
ALTER TABLE total_attempts ADD COLUMN web_search_requests HUGEINT DEFAULT 0;

ALTER TABLE workflow_findings ADD COLUMN price_key STRUCT(day DATE, tier VARCHAR, over INTEGER, account VARCHAR);
ALTER TABLE workflow_findings ADD COLUMN priced_kinds UTINYINT;
ALTER TABLE workflow_findings ADD COLUMN reasoning_output_tokens BIGINT DEFAULT 0;
ALTER TABLE workflow_findings ADD COLUMN cache_write_1h_input_tokens BIGINT DEFAULT 0;
ALTER TABLE workflow_findings ADD COLUMN web_search_requests BIGINT DEFAULT 0;
ALTER TABLE rollup_findings ADD COLUMN price_key STRUCT(day DATE, tier VARCHAR, over INTEGER, account VARCHAR);
ALTER TABLE rollup_findings ADD COLUMN priced_kinds UTINYINT;
ALTER TABLE rollup_findings ADD COLUMN reasoning_output_tokens BIGINT DEFAULT 0;
ALTER TABLE rollup_findings ADD COLUMN cache_write_1h_input_tokens BIGINT DEFAULT 0;
ALTER TABLE rollup_findings ADD COLUMN web_search_requests BIGINT DEFAULT 0;

ALTER TABLE workflow_steps ADD COLUMN price_key STRUCT(day DATE, tier VARCHAR, over INTEGER, account VARCHAR);
ALTER TABLE workflow_steps ADD COLUMN priced_kinds UTINYINT;
ALTER TABLE workflow_steps ADD COLUMN reasoning_output_tokens HUGEINT DEFAULT 0;
ALTER TABLE workflow_steps ADD COLUMN cache_write_1h_input_tokens HUGEINT DEFAULT 0;
ALTER TABLE workflow_steps ADD COLUMN web_search_requests HUGEINT DEFAULT 0;
ALTER TABLE rollup_steps ADD COLUMN price_key STRUCT(day DATE, tier VARCHAR, over INTEGER, account VARCHAR);
ALTER TABLE rollup_steps ADD COLUMN priced_kinds UTINYINT;
ALTER TABLE rollup_steps ADD COLUMN reasoning_output_tokens HUGEINT DEFAULT 0;
ALTER TABLE rollup_steps ADD COLUMN cache_write_1h_input_tokens HUGEINT DEFAULT 0;
ALTER TABLE rollup_steps ADD COLUMN web_search_requests HUGEINT DEFAULT 0;
ALTER TABLE total_steps ADD COLUMN price_key STRUCT(day DATE, tier VARCHAR, over INTEGER, account VARCHAR);
ALTER TABLE total_steps ADD COLUMN priced_kinds UTINYINT;
ALTER TABLE total_steps ADD COLUMN reasoning_output_tokens HUGEINT DEFAULT 0;
ALTER TABLE total_steps ADD COLUMN cache_write_1h_input_tokens HUGEINT DEFAULT 0;
ALTER TABLE total_steps ADD COLUMN web_search_requests HUGEINT DEFAULT 0;

ALTER TABLE total_shapes ADD COLUMN price_key STRUCT(day DATE, tier VARCHAR, over INTEGER, account VARCHAR);
ALTER TABLE total_shapes ADD COLUMN priced_kinds UTINYINT;
ALTER TABLE total_shapes ADD COLUMN reasoning_output_tokens HUGEINT DEFAULT 0;
ALTER TABLE total_shapes ADD COLUMN cache_write_1h_input_tokens HUGEINT DEFAULT 0;
ALTER TABLE total_shapes ADD COLUMN web_search_requests HUGEINT DEFAULT 0;

-- A bill's facts: one-hour cache writes and web searches (Anthropic's usage
-- export), and the prompt size their context window starts above (its
-- `context_window`, `200k-1M`: 200000), which selects their price.
ALTER TABLE bill_facts ADD COLUMN cache_write_1h_input_tokens BIGINT;
ALTER TABLE bill_facts ADD COLUMN web_search_requests BIGINT;
ALTER TABLE bill_facts ADD COLUMN prompt_over BIGINT;

-- Cost kind `other_currency` (an emitter's cost in another currency than
-- USD) is told apart from `unknown` (an answer without usage), and a
-- failure that billed searches is no longer free: stored workflows are
-- derived again at the next open, with their price keys.
UPDATE derived_state SET stale = true;
