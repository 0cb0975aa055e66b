-- labels.sql: bounded label values (ARCHITECTURE.md, "Bounded labels").
-- Not a report itself: it defines the temp macro kept_label. The first K
-- values of each label (label_values, admitted by admit.sql) keep rollup
-- rows and series of their own; any other value is summed under 'other'.
-- The store defines this macro only while some label holds K values; until
-- then every value seen is admitted, and kept_label(label, v) is simply v
-- (the lookup below costs a join per call even when it cannot fold).
--
-- Parameters: the variables fold_labels (BOOLEAN: false leaves every value
--   as it is; a report on one workflow whose name was never admitted reads
--   the per-workflow facts, which keep every name) and full_labels
--   (VARCHAR[]: the labels that hold K values).
-- Columns: none. kept_label(label, value) -> the value, or 'other'; NULL stays NULL.
CREATE OR REPLACE TEMP MACRO kept_label(label_name, v) AS
    CASE WHEN v IS NULL OR NOT getvariable('fold_labels')
              OR NOT list_contains(getvariable('full_labels'), label_name) THEN v
         WHEN EXISTS (SELECT 1 FROM label_values l WHERE l.label = label_name AND l.value = v) THEN v
         ELSE 'other' END;
