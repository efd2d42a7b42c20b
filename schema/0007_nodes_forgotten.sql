-- 0007: nodes can be forgotten (gpubench nodes --forget): forgotten_at is
-- when, NULL for a known node. A forgotten node keeps its row (results and
-- attempts name it) but the coordinator no longer loads it, places on it or
-- counts it when it checks a spec; an agent that connects again clears it.
-- v_nodes of 0001 with the column appended (columns are only appended).
ALTER TABLE nodes ADD COLUMN forgotten_at TEXT;
DROP VIEW v_nodes;
CREATE VIEW v_nodes AS
SELECT name AS node, agent_id, state, cpu_model, n_gpus, gpu_model, labels, last_seen,
       forgotten_at
FROM nodes;
