-- 0006: v_ranks of 0002 with two columns more at the end, from each rank's
-- own record: params_fnv (the checksum of the parameters a resnet50 rank
-- ended with; equal on every rank of a data-parallel job) and late_ms (how
-- long after the common start time the rank began). Columns are only
-- appended.
DROP VIEW v_ranks;
CREATE VIEW v_ranks AS
SELECT j.sweep_id,
       k.job_id,
       k.attempt,
       k.rank,
       n.name                                         AS node,
       k.state,
       k.status,
       k.error,
       k.placed_at,
       k.assigned_at,
       k.ready_at,
       k.start_at,
       json_extract(k.record, '$.dist.started_at_ms') AS started_at_ms,
       k.ended_at,
       json_extract(k.record, '$.details.params_fnv') AS params_fnv,
       json_extract(k.record, '$.dist.late_ms')       AS late_ms
FROM ranks k
JOIN jobs j ON j.job_id = k.job_id
LEFT JOIN nodes n ON n.agent_id = k.agent_id;
