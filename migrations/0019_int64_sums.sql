-- Stored sums in 64-bit integers (docs/record-format.md, "Bounds of counts and money"): every
-- count, token and money value kept per workflow and per minute is a BIGINT.
-- DuckDB's 128-bit arithmetic is out-of-line calls in the bundled build, and
-- scans and sums of HUGEINT columns cost four to five times BIGINT's; no
-- per-workflow or per-minute sum comes near 2^63 (pico-USD: $9.2M in one
-- row, and a longer sum is refused, never wrapped). The all-time totals
-- (total_*) stay HUGEINT: a year of one model's spend may pass $9.2M.
-- A stored value past the bound stops this migration with the table and
-- column named, rather than wrapping. (The check is written out in each
-- statement, not a macro: the log replays these statements after a crash,
-- where no temporary macro exists.)
ALTER TABLE workflow_spend ALTER COLUMN input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN input_tokens::BIGINT
         ELSE error('workflow_spend.input_tokens holds ' || input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE workflow_spend ALTER COLUMN output_tokens SET DATA TYPE BIGINT USING
    CASE WHEN output_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN output_tokens::BIGINT
         ELSE error('workflow_spend.output_tokens holds ' || output_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE workflow_spend ALTER COLUMN cached_input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN cached_input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN cached_input_tokens::BIGINT
         ELSE error('workflow_spend.cached_input_tokens holds ' || cached_input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE workflow_spend ALTER COLUMN cache_write_input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN cache_write_input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN cache_write_input_tokens::BIGINT
         ELSE error('workflow_spend.cache_write_input_tokens holds ' || cache_write_input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE workflow_spend ALTER COLUMN emitter_cost_pusd SET DATA TYPE BIGINT USING
    CASE WHEN emitter_cost_pusd BETWEEN -9223372036854775808 AND 9223372036854775807 THEN emitter_cost_pusd::BIGINT
         ELSE error('workflow_spend.emitter_cost_pusd holds ' || emitter_cost_pusd::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE workflow_findings ALTER COLUMN input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN input_tokens::BIGINT
         ELSE error('workflow_findings.input_tokens holds ' || input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE workflow_findings ALTER COLUMN output_tokens SET DATA TYPE BIGINT USING
    CASE WHEN output_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN output_tokens::BIGINT
         ELSE error('workflow_findings.output_tokens holds ' || output_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE workflow_findings ALTER COLUMN cached_input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN cached_input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN cached_input_tokens::BIGINT
         ELSE error('workflow_findings.cached_input_tokens holds ' || cached_input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE workflow_findings ALTER COLUMN cache_write_input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN cache_write_input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN cache_write_input_tokens::BIGINT
         ELSE error('workflow_findings.cache_write_input_tokens holds ' || cache_write_input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE workflow_findings ALTER COLUMN emitter_cost_pusd SET DATA TYPE BIGINT USING
    CASE WHEN emitter_cost_pusd BETWEEN -9223372036854775808 AND 9223372036854775807 THEN emitter_cost_pusd::BIGINT
         ELSE error('workflow_findings.emitter_cost_pusd holds ' || emitter_cost_pusd::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE workflow_steps ALTER COLUMN input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN input_tokens::BIGINT
         ELSE error('workflow_steps.input_tokens holds ' || input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE workflow_steps ALTER COLUMN output_tokens SET DATA TYPE BIGINT USING
    CASE WHEN output_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN output_tokens::BIGINT
         ELSE error('workflow_steps.output_tokens holds ' || output_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE workflow_steps ALTER COLUMN cached_input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN cached_input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN cached_input_tokens::BIGINT
         ELSE error('workflow_steps.cached_input_tokens holds ' || cached_input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE workflow_steps ALTER COLUMN cache_write_input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN cache_write_input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN cache_write_input_tokens::BIGINT
         ELSE error('workflow_steps.cache_write_input_tokens holds ' || cache_write_input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE workflow_steps ALTER COLUMN emitter_cost_pusd SET DATA TYPE BIGINT USING
    CASE WHEN emitter_cost_pusd BETWEEN -9223372036854775808 AND 9223372036854775807 THEN emitter_cost_pusd::BIGINT
         ELSE error('workflow_steps.emitter_cost_pusd holds ' || emitter_cost_pusd::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE workflow_latency ALTER COLUMN sum_us SET DATA TYPE BIGINT USING
    CASE WHEN sum_us BETWEEN -9223372036854775808 AND 9223372036854775807 THEN sum_us::BIGINT
         ELSE error('workflow_latency.sum_us holds ' || sum_us::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_attempts ALTER COLUMN input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN input_tokens::BIGINT
         ELSE error('rollup_attempts.input_tokens holds ' || input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_attempts ALTER COLUMN output_tokens SET DATA TYPE BIGINT USING
    CASE WHEN output_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN output_tokens::BIGINT
         ELSE error('rollup_attempts.output_tokens holds ' || output_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_attempts ALTER COLUMN cached_input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN cached_input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN cached_input_tokens::BIGINT
         ELSE error('rollup_attempts.cached_input_tokens holds ' || cached_input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_attempts ALTER COLUMN cache_write_input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN cache_write_input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN cache_write_input_tokens::BIGINT
         ELSE error('rollup_attempts.cache_write_input_tokens holds ' || cache_write_input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_attempts ALTER COLUMN emitter_cost_pusd SET DATA TYPE BIGINT USING
    CASE WHEN emitter_cost_pusd BETWEEN -9223372036854775808 AND 9223372036854775807 THEN emitter_cost_pusd::BIGINT
         ELSE error('rollup_attempts.emitter_cost_pusd holds ' || emitter_cost_pusd::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_findings ALTER COLUMN input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN input_tokens::BIGINT
         ELSE error('rollup_findings.input_tokens holds ' || input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_findings ALTER COLUMN output_tokens SET DATA TYPE BIGINT USING
    CASE WHEN output_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN output_tokens::BIGINT
         ELSE error('rollup_findings.output_tokens holds ' || output_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_findings ALTER COLUMN cached_input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN cached_input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN cached_input_tokens::BIGINT
         ELSE error('rollup_findings.cached_input_tokens holds ' || cached_input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_findings ALTER COLUMN cache_write_input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN cache_write_input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN cache_write_input_tokens::BIGINT
         ELSE error('rollup_findings.cache_write_input_tokens holds ' || cache_write_input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_findings ALTER COLUMN emitter_cost_pusd SET DATA TYPE BIGINT USING
    CASE WHEN emitter_cost_pusd BETWEEN -9223372036854775808 AND 9223372036854775807 THEN emitter_cost_pusd::BIGINT
         ELSE error('rollup_findings.emitter_cost_pusd holds ' || emitter_cost_pusd::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_latency ALTER COLUMN sum_us SET DATA TYPE BIGINT USING
    CASE WHEN sum_us BETWEEN -9223372036854775808 AND 9223372036854775807 THEN sum_us::BIGINT
         ELSE error('rollup_latency.sum_us holds ' || sum_us::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_recovery ALTER COLUMN sum_us SET DATA TYPE BIGINT USING
    CASE WHEN sum_us BETWEEN -9223372036854775808 AND 9223372036854775807 THEN sum_us::BIGINT
         ELSE error('rollup_recovery.sum_us holds ' || sum_us::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_steps ALTER COLUMN input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN input_tokens::BIGINT
         ELSE error('rollup_steps.input_tokens holds ' || input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_steps ALTER COLUMN output_tokens SET DATA TYPE BIGINT USING
    CASE WHEN output_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN output_tokens::BIGINT
         ELSE error('rollup_steps.output_tokens holds ' || output_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_steps ALTER COLUMN cached_input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN cached_input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN cached_input_tokens::BIGINT
         ELSE error('rollup_steps.cached_input_tokens holds ' || cached_input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_steps ALTER COLUMN cache_write_input_tokens SET DATA TYPE BIGINT USING
    CASE WHEN cache_write_input_tokens BETWEEN -9223372036854775808 AND 9223372036854775807 THEN cache_write_input_tokens::BIGINT
         ELSE error('rollup_steps.cache_write_input_tokens holds ' || cache_write_input_tokens::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_steps ALTER COLUMN emitter_cost_pusd SET DATA TYPE BIGINT USING
    CASE WHEN emitter_cost_pusd BETWEEN -9223372036854775808 AND 9223372036854775807 THEN emitter_cost_pusd::BIGINT
         ELSE error('rollup_steps.emitter_cost_pusd holds ' || emitter_cost_pusd::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_steps ALTER COLUMN added_us SET DATA TYPE BIGINT USING
    CASE WHEN added_us BETWEEN -9223372036854775808 AND 9223372036854775807 THEN added_us::BIGINT
         ELSE error('rollup_steps.added_us holds ' || added_us::VARCHAR || ', past the 64-bit bound of a stored sum') END;
ALTER TABLE rollup_steps ALTER COLUMN added_to_outcome_us SET DATA TYPE BIGINT USING
    CASE WHEN added_to_outcome_us BETWEEN -9223372036854775808 AND 9223372036854775807 THEN added_to_outcome_us::BIGINT
         ELSE error('rollup_steps.added_to_outcome_us holds ' || added_to_outcome_us::VARCHAR || ', past the 64-bit bound of a stored sum') END;
