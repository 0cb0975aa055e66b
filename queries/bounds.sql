-- bounds.sql: the bound of a stored sum (docs/record-format.md, "Bounds of
-- counts and money").
-- Every count, token and money value the derived tables keep per workflow
-- and per minute is a BIGINT (migrations/0019_int64_sums.sql); only the
-- all-time totals, and sums taken when a report reads, are HUGEINT.
-- Not a report itself: it defines the macro int64_of(v, what): v as a
-- BIGINT, or, past a BIGINT's range, an error that names `what` and the
-- value. A derivation round that meets it isolates the workflow whose rows
-- carried the sum past the bound and quarantines it with that message; no
-- stored sum is ever wrapped.
-- Parameters: of int64_of, v (a sum, of any integer type) and what (the
--   table and column it is stored in, for the message).
-- Columns: none (it defines a macro).
CREATE OR REPLACE TEMP MACRO int64_of(v, what) AS
    CASE WHEN v BETWEEN -9223372036854775808 AND 9223372036854775807 THEN v::BIGINT
         ELSE error(what || ' sums to ' || v::VARCHAR
                    || ', past the bound of a stored sum (9223372036854775807; in pico-USD, $9.2M)') END;
