-- 0010: the telemetry views, per result that ended its job.
-- (1) v_telemetry and v_cpu_telemetry showed every stored result, a
--     superseded attempt's too (an agent given up as lost that came back
--     with its result after the job had run again): the documented queries
--     showed such a job twice, the stale figures looking like the job's. Now
--     only the job's current attempt, as v_results; every result's rows stay
--     in results, telemetry and telemetry_cpu.
-- (2) v_cpu_telemetry's percentages and clock are REAL in every row (a whole
--     number in the record came back INTEGER: taken_pct / 100 was 0 there),
--     and two columns are appended: judged (1 when the window held enough
--     clock ticks to judge contention, docs/telemetry.md; 0: neither rule
--     applied, whatever taken_pct says) and ticks.
-- Columns otherwise as in 0004.
DROP VIEW v_telemetry;
CREATE VIEW v_telemetry AS
SELECT j.sweep_id,
       r.job_id,
       r.attempt,
       n.name                                                       AS node,
       r.device_model                                               AS gpu_model,
       r.kind,
       json_extract(g.value, '$.gpu')                               AS gpu,
       json_extract(g.value, '$.samples')                           AS samples,
       json_extract(g.value, '$.sm_mhz.median')                     AS sm_clock_median_mhz,
       json_extract(g.value, '$.sm_mhz.min')                        AS sm_clock_min_mhz,
       json_extract(g.value, '$.mem_mhz.median')                    AS mem_clock_median_mhz,
       json_extract(g.value, '$.temp_c.max')                        AS temp_max_c,
       json_extract(g.value, '$.power_w.median')                    AS power_median_w,
       json_extract(g.value, '$.power_w.max')                       AS power_max_w,
       json_extract(g.value, '$.power_limit_w')                     AS power_limit_w,
       json_extract(g.value, '$.util_pct.median')                   AS util_median_pct,
       json_extract(g.value, '$.mem_used_bytes.max')                AS mem_used_max_bytes,
       (SELECT group_concat(value, ',') FROM json_each(g.value, '$.reason_names'))   AS reasons,
       (SELECT group_concat(value, ',') FROM json_each(g.value, '$.throttle_names')) AS throttle_reasons,
       json_extract(g.value, '$.throttled_samples') > 0             AS throttled,
       r.valid,
       r.invalid_reason
FROM results r
JOIN json_each(r.record, '$.telemetry.gpus') AS g
JOIN jobs j ON j.job_id = r.job_id
LEFT JOIN attempts a ON a.job_id = r.job_id AND a.attempt = r.attempt
LEFT JOIN nodes n ON n.agent_id = a.agent_id
WHERE r.record IS NOT NULL AND json_type(r.record, '$.telemetry.gpus') = 'array'
  AND r.attempt = j.attempt;

DROP VIEW v_cpu_telemetry;
CREATE VIEW v_cpu_telemetry AS
SELECT j.sweep_id,
       r.job_id,
       r.attempt,
       n.name                                                       AS node,
       r.device_model                                               AS cpu_model,
       r.kind,
       json_extract(r.record, '$.telemetry.cores')                  AS cores,
       CAST(json_extract(r.record, '$.telemetry.cpu.others_pct') AS REAL)  AS others_pct,
       CAST(json_extract(r.record, '$.telemetry.cpu.steal_pct') AS REAL)   AS steal_pct,
       CAST(json_extract(r.record, '$.telemetry.cpu.taken_pct') AS REAL)   AS taken_pct,
       CAST(json_extract(r.record, '$.telemetry.cpu.worker_pct') AS REAL)  AS worker_pct,
       CAST(json_extract(r.record, '$.telemetry.cpu.cpu_mhz.median') AS REAL) AS cpu_mhz_median,
       json_extract(r.record, '$.telemetry.cpu.flagged')            AS flagged,
       r.valid,
       r.invalid_reason,
       json_extract(r.record, '$.telemetry.cpu.judged')             AS judged,
       json_extract(r.record, '$.telemetry.cpu.ticks')              AS ticks
FROM results r
JOIN jobs j ON j.job_id = r.job_id
LEFT JOIN attempts a ON a.job_id = r.job_id AND a.attempt = r.attempt
LEFT JOIN nodes n ON n.agent_id = a.agent_id
WHERE r.record IS NOT NULL AND json_extract(r.record, '$.telemetry.source') = 'proc'
  AND r.attempt = j.attempt;
