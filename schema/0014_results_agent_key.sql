-- 0014: the key each result came under. results.agent_key is the CURVE
-- public key (Z85) of the agent that delivered the result, key_name that
-- key's name in --authorized at the time ('' when its line names none).
-- nodes.agent_key holds only a node's current pin: a key rotated on its
-- state directory, or a revoked key's id taken by another listed key,
-- moves the pin, and the node's older results could not be told from its
-- newer ones. '' for both on a coordinator without keys; NULL for results
-- stored before 0014, and where the key was no longer known when a
-- multi-node job's result was put together (its agent's key revoked
-- meanwhile). Columns only appended; no view changes.
ALTER TABLE results ADD COLUMN agent_key TEXT;
ALTER TABLE results ADD COLUMN key_name TEXT;
