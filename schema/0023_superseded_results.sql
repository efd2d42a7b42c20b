-- 0023: a job that failed after its last attempt was given up (its agent
-- lost) showed that attempt's figures: the agent came back with the
-- result, which the coordinator keeps as the attempt's, 'superseded', and
-- the views took the job's current attempt's result whatever its state. A
-- failed job carried images/s, step times, valid and telemetry it never
-- ended with. v_results, v_allreduce, v_telemetry and v_cpu_telemetry now
-- join a result only where its attempt is not superseded; the result stays
-- in results (and its telemetry rows in telemetry and telemetry_cpu).
-- Columns as they were (0020, 0010 and 0018's definitions otherwise).
-- And jobs.interconnect for allreduce jobs, which the coordinator left NULL
-- (it kept it for resnet50 only), so that an allreduce cancelled, lost or
-- failed before its record says in v_results which interconnect it was to
-- measure (the NVLink and PCIe rows of a sweep looked the same): the job's
-- parameter. The coordinator now stores it for new jobs.
UPDATE jobs SET interconnect = json_extract(params, '$.interconnect')
WHERE kind = 'allreduce' AND interconnect IS NULL;


DROP VIEW v_results;
CREATE VIEW v_results AS
SELECT j.sweep_id,
       j.job_id,
       n.name                                         AS node,
       COALESCE(r.device_model,
                CASE WHEN COALESCE(r.backend, a.backend, j.backend) = 'cpu' THEN n.cpu_model
                     WHEN j.kind = 'sleep' AND a.agent_id IS NOT NULL
                     THEN 'none (the sleep kind uses no GPU)'
                     ELSE n.gpu_model END)            AS gpu_model,
       COALESCE(r.backend, a.backend, j.backend)      AS backend,
       j.kind,
       COALESCE(r.n_devices, j.n_gpus * COALESCE(json_extract(j.params, '$.n_nodes'), 1))
                                                      AS n_gpus,
       COALESCE(r.precision, j.precision)             AS precision,
       j.batch_per_gpu,
       COALESCE(json_extract(r.record, '$.interconnect'), j.interconnect) AS interconnect,
       r.images_per_sec,
       r.step_ms_median,
       r.step_ms_p90,
       j.state                                        AS status,
       j.error,
       j.finished_at,
       j.synthetic,
       j.attempt,
       r.gflops,
       COALESCE(json_extract(j.params, '$.n_nodes'), 1) AS n_nodes,
       COALESCE((SELECT group_concat(name, ',') FROM
                    (SELECT kn.name FROM ranks k JOIN nodes kn ON kn.agent_id = k.agent_id
                     WHERE k.job_id = j.job_id AND k.attempt = j.attempt ORDER BY k.rank)),
                n.name)                               AS nodes,
       (SELECT group_concat(transport, ',') FROM v_transports t
        WHERE t.job_id = j.job_id AND t.attempt = j.attempt) AS nccl_transports,
       r.valid,
       r.invalid_reason,
       json_extract(r.record, '$.telemetry.flag')     AS telemetry_flag,
       COALESCE(json_extract(r.record, '$.image_size'),
                json_extract(j.params, '$.image_size'))  AS image_size,
       CASE WHEN j.kind = 'gemm'
            THEN COALESCE(json_extract(r.record, '$.reps'), json_extract(j.params, '$.reps'))
            ELSE COALESCE(json_extract(r.record, '$.steps'),
                          json_extract(j.params, '$.steps')) END AS steps,
       CASE WHEN j.kind = 'resnet50'
            THEN COALESCE(json_extract(r.record, '$.details.bucket_mb'),
                          json_extract(j.params, '$.bucket_mb'), 25) END AS bucket_mb,
       CASE WHEN j.kind = 'gemm'
            THEN COALESCE(json_extract(r.record, '$.m'), json_extract(j.params, '$.m')) END AS m,
       CASE WHEN j.kind = 'gemm'
            THEN COALESCE(json_extract(r.record, '$.n'), json_extract(j.params, '$.n')) END AS n,
       CASE WHEN j.kind = 'gemm'
            THEN COALESCE(json_extract(r.record, '$.k'), json_extract(j.params, '$.k')) END AS k,
       CASE WHEN j.kind = 'resnet50' AND j.n_gpus > 1
            THEN COALESCE(json_extract(r.record, '$.details.launch'),
                          CASE WHEN r.record IS NOT NULL AND r.status = 'ok' THEN 'threads' END,
                          json_extract(j.params, '$.launch'), 'auto') END AS launch
FROM jobs j
LEFT JOIN attempts a ON a.job_id = j.job_id AND a.attempt = j.attempt
LEFT JOIN results r ON r.job_id = j.job_id AND r.attempt = j.attempt AND a.state IS NOT 'superseded'
LEFT JOIN nodes n ON n.agent_id = a.agent_id
WHERE j.state IN ('done', 'failed', 'cancelled');

DROP VIEW v_allreduce;
CREATE VIEW v_allreduce AS
SELECT j.sweep_id,
       j.job_id,
       n.name                                                             AS node,
       r.device_model                                                     AS gpu_model,
       r.backend,
       r.n_devices                                                        AS n_gpus,
       COALESCE(json_extract(j.params, '$.n_nodes'), 1)                   AS n_nodes,
       COALESCE(json_extract(r.record, '$.interconnect'), j.interconnect) AS interconnect,
       s.bytes,
       s.count,
       s.time_us,
       s.algbw_gbs,
       s.busbw_gbs,
       s.ok,
       r.valid,
       j.state                                                            AS status,
       (SELECT group_concat(transport, ',') FROM v_transports t
        WHERE t.job_id = j.job_id AND t.attempt = j.attempt)              AS nccl_transports,
       j.finished_at
FROM allreduce_sizes s
JOIN jobs j ON j.job_id = s.job_id AND j.attempt = s.attempt
JOIN results r ON r.job_id = s.job_id AND r.attempt = s.attempt
LEFT JOIN attempts a ON a.job_id = s.job_id AND a.attempt = s.attempt
LEFT JOIN nodes n ON n.agent_id = a.agent_id
WHERE j.state IN ('done', 'failed', 'cancelled') AND a.state IS NOT 'superseded';

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
  AND r.attempt = j.attempt AND a.state IS NOT 'superseded';

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
  AND r.attempt = j.attempt AND a.state IS NOT 'superseded';
