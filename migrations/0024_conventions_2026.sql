-- The 2026 GenAI conventions' facts (docs/record-format.md, "From
-- OpenTelemetry spans").
--
-- Reasoning ("thinking") tokens: the part of an attempt's output tokens
-- the model spent reasoning. Billed as output, so no price reads them; the
-- report counts them, total and wasted. Older attempts stated none (NULL);
-- the sums of their groups are 0, exactly what they add, so nothing is
-- derived again.
--
-- cost_currency: the currency of a cost an emitter stated in other than
-- USD, never converted: the attempt's cost is unknown. Older attempts had
-- none, so their costs stand.
ALTER TABLE attempts ADD COLUMN reasoning_output_tokens BIGINT;
ALTER TABLE attempts ADD COLUMN cost_currency VARCHAR;
ALTER TABLE workflow_spend ADD COLUMN reasoning_output_tokens BIGINT DEFAULT 0;
ALTER TABLE workflow_spend ALTER COLUMN reasoning_output_tokens SET NOT NULL;
ALTER TABLE rollup_attempts ADD COLUMN reasoning_output_tokens BIGINT DEFAULT 0;
ALTER TABLE rollup_attempts ALTER COLUMN reasoning_output_tokens SET NOT NULL;
ALTER TABLE total_attempts ADD COLUMN reasoning_output_tokens HUGEINT DEFAULT 0;
ALTER TABLE total_attempts ALTER COLUMN reasoning_output_tokens SET NOT NULL;
