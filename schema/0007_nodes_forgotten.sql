-- 0007: nodes can be forgotten (gpubench nodes --forget): forgotten_at is
-- when, NULL for a known node. A forgotten node keeps its row (results and
-- attempts name it) but the coordinator no longer loads it, places on it or
-- counts it when it checks a spec; an agent that connects again clears it.
-- agent_key is the CURVE public key the agent registered with ('' without
-- keys): an agent id stays pinned to it across coordinator restarts.
-- v_nodes of 0001 with forgotten_at appended (columns are only appended).
ALTER TABLE nodes ADD COLUMN forgotten_at TEXT;
ALTER TABLE nodes ADD COLUMN agent_key TEXT NOT NULL DEFAULT '';
DROP VIEW v_nodes;
CREATE VIEW v_nodes AS
SELECT name AS node, agent_id, state, cpu_model, n_gpus, gpu_model, labels, last_seen,
       forgotten_at
FROM nodes;
