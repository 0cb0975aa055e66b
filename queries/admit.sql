-- admit.sql: admits the label values of newly derived facts into
-- label_values, the first ones seen first, until each label holds K
-- (ARCHITECTURE.md, "Bounded labels"). Not a report itself.
--
-- Parameters: temp.new_facts and temp.new_spend (facts.sql's output) and the variable
--   label_limit (BIGINT: K, the values each label may hold).
-- Columns: none; it inserts (label, value) rows into label_values.
-- Labels: workflow (names), provider and model (of primary and fallback
--   routes, requested and served), route_group, primary_route (the key
--   tune's curve groups by: route group, else provider/model, lowercase),
--   dim1..dim3 (dimension values). A value is seen at its workflow's first attempt (its attempt's
--   minute for spend entries); ties go by value, so a rebuild admits what
--   the writes admitted when they came in time order.
INSERT INTO label_values
WITH seen_in_facts AS (
    UNPIVOT (SELECT first_at AS seen_at, workflow_name AS workflow, primary_provider AS provider_1,
                    fallback_provider AS provider_2, primary_model AS model_1, fallback_model AS model_2,
                    primary_route_group AS route_group_1, fallback_route_group AS route_group_2,
                    lower(coalesce(primary_route_group, primary_provider || '/' || primary_model)) AS primary_route,
                    dim1, dim2, dim3
             FROM temp.new_facts)
    ON workflow, provider_1, provider_2, model_1, model_2, route_group_1, route_group_2, primary_route,
       dim1, dim2, dim3
    INTO NAME label VALUE value
),
seen_in_spend AS (
    UNPIVOT (SELECT attempt_minute AS seen_at, provider AS provider_3, served_provider AS provider_4,
                    model AS model_3, served_model AS model_4
             FROM temp.new_spend)
    ON provider_3, provider_4, model_3, model_4
    INTO NAME label VALUE value
),
seen AS (
    SELECT label, value, seen_at FROM seen_in_facts
    UNION ALL
    SELECT label, value, seen_at FROM seen_in_spend
),
candidates AS (
    SELECT regexp_replace(label, '_[0-9]$', '') AS label, value, min(seen_at) AS seen_at
    FROM seen
    GROUP BY ALL
),
fresh AS (
    SELECT c.* FROM candidates c
    WHERE NOT EXISTS (SELECT 1 FROM label_values l WHERE l.label = c.label AND l.value = c.value)
),
room AS (
    SELECT label, count(*) AS held FROM label_values GROUP BY label
)
SELECT f.label, f.value
FROM fresh f
LEFT JOIN room r USING (label)
QUALIFY row_number() OVER (PARTITION BY f.label ORDER BY f.seen_at, f.value)
        <= getvariable('label_limit') - coalesce(r.held, 0);
