-- 0015: gpu_model of a job that has no device_model of its own (it failed
-- before its worker wrote one, its worker died, its agent was lost, or it
-- never ran). It fell back to the node's gpu_model, which is the first
-- GPU's name on a node with GPUs: a sleep job (it uses no GPU) said
-- 'none (the sleep kind uses no GPU)' when it finished and the node's GPU
-- when it failed or was lost, and a cpu job that failed on a GPU node said
-- the GPU where a finished one says the CPU. Now the fallback is what the
-- worker would have said: the CPU's model (nodes.cpu_model, the same
-- string) for a cpu job, 'none (the sleep kind uses no GPU)' for any other
-- sleep job, else the node's gpu_model. The view of 0013 otherwise.
DROP VIEW v_results;
CREATE VIEW v_results AS
SELECT j.sweep_id,
       j.job_id,
       n.name                                         AS node,
       COALESCE(r.device_model,
                CASE WHEN COALESCE(r.backend, a.backend, j.backend) = 'cpu' THEN n.cpu_model
                     WHEN j.kind = 'sleep' THEN 'none (the sleep kind uses no GPU)'
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
       COALESCE(json_extract(r.record, '$.steps'),
                json_extract(j.params, '$.steps'))       AS steps,
       CASE WHEN j.kind = 'resnet50'
            THEN COALESCE(json_extract(r.record, '$.details.bucket_mb'),
                          json_extract(j.params, '$.bucket_mb'), 25) END AS bucket_mb
FROM jobs j
LEFT JOIN attempts a ON a.job_id = j.job_id AND a.attempt = j.attempt
LEFT JOIN results r ON r.job_id = j.job_id AND r.attempt = j.attempt
LEFT JOIN nodes n ON n.agent_id = a.agent_id
WHERE j.state IN ('done', 'failed', 'cancelled');
