-- old_facts_elsewhere.sql: the stored facts of the touched workflows that
-- old_facts.sql did not find near the write (a workflow that started long
-- before), by a scan of every stored id, added to temp.old_facts in one
-- statement (an append would keep the table's first, smaller shape of
-- row groups).
-- Parameters: temp.touched_known and temp.old_facts (old_facts.sql).
-- Columns of temp.old_facts: those of workflow_facts.
CREATE OR REPLACE TEMP TABLE old_facts_elsewhere AS
SELECT * FROM workflow_facts
WHERE workflow_id IN (SELECT workflow_id FROM temp.touched_known
                      WHERE workflow_id NOT IN (SELECT workflow_id FROM temp.old_facts));
CREATE OR REPLACE TEMP TABLE old_facts AS
SELECT * FROM temp.old_facts UNION ALL SELECT * FROM temp.old_facts_elsewhere;
DROP TABLE temp.old_facts_elsewhere;
