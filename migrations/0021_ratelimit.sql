-- Rate-limit headroom (docs/record-format.md, "Headroom"): per kind
-- (requests, tokens, input tokens, output tokens) what the provider said
-- remained, its limit, and the milliseconds until the window reset, as
-- stated on the attempt's response. Older rows have none (NULL).
ALTER TABLE attempts ADD COLUMN ratelimit_remaining_requests BIGINT;
ALTER TABLE attempts ADD COLUMN ratelimit_limit_requests BIGINT;
ALTER TABLE attempts ADD COLUMN ratelimit_reset_requests_ms BIGINT;
ALTER TABLE attempts ADD COLUMN ratelimit_remaining_tokens BIGINT;
ALTER TABLE attempts ADD COLUMN ratelimit_limit_tokens BIGINT;
ALTER TABLE attempts ADD COLUMN ratelimit_reset_tokens_ms BIGINT;
ALTER TABLE attempts ADD COLUMN ratelimit_remaining_input_tokens BIGINT;
ALTER TABLE attempts ADD COLUMN ratelimit_limit_input_tokens BIGINT;
ALTER TABLE attempts ADD COLUMN ratelimit_reset_input_tokens_ms BIGINT;
ALTER TABLE attempts ADD COLUMN ratelimit_remaining_output_tokens BIGINT;
ALTER TABLE attempts ADD COLUMN ratelimit_limit_output_tokens BIGINT;
ALTER TABLE attempts ADD COLUMN ratelimit_reset_output_tokens_ms BIGINT;
