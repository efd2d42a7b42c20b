-- 0005: v_results of 0004 with two columns more at the end, image_size
-- and steps (from the record, else the job's parameters), so that queries
-- comparing runs can keep apart what differs only in input size (a 64x64
-- run is not a regression of a 224x224 one). Columns are only appended.
DROP VIEW v_results;
CREATE VIEW v_results AS
SELECT j.sweep_id,
       j.job_id,
       n.name                                         AS node,
       COALESCE(r.device_model, n.gpu_model)          AS gpu_model,
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
       COALESCE(json_extract(r.record, '$.steps'),
                json_extract(j.params, '$.steps'))       AS steps
FROM jobs j
LEFT JOIN attempts a ON a.job_id = j.job_id AND a.attempt = j.attempt
LEFT JOIN results r ON r.job_id = j.job_id AND r.attempt = j.attempt
LEFT JOIN nodes n ON n.agent_id = a.agent_id
WHERE j.state IN ('done', 'failed', 'cancelled');
