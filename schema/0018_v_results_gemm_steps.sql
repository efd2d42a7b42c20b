-- 0018: a gemm's steps. One product is a gemm's step (its step_ms_median
-- and step_ms_p90 are the time of one product, 0016), but v_results.steps
-- read the record's or the job's 'steps', which a gemm has not: a gemm row
-- had steps NULL beside a per-product median. Now a gemm row's steps is its
-- timed products, the record's reps, else the job's parameter reps (the
-- spec fills in its default, 10, so every gemm job has one); other kinds as
-- before.
-- And gpu_model of a job that never ran (cancelled or failed before any
-- node took it: no attempt on a node): NULL for every kind, as there is
-- no node and no device. 0015's fallback, what the worker would have said,
-- holds for a job placed on a node; but a sleep job that never ran said
-- 'none (the sleep kind uses no GPU)' beside an empty gpu_model for every
-- other kind, and a never-placed sleep of backend auto (the smoke spec's)
-- might as well have run on the CPU, whose model it would have said.
-- No view reads v_results. The view of 0016 otherwise; no column added or
-- moved.
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
            THEN COALESCE(json_extract(r.record, '$.k'), json_extract(j.params, '$.k')) END AS k
FROM jobs j
LEFT JOIN attempts a ON a.job_id = j.job_id AND a.attempt = j.attempt
LEFT JOIN results r ON r.job_id = j.job_id AND r.attempt = j.attempt
LEFT JOIN nodes n ON n.agent_id = a.agent_id
WHERE j.state IN ('done', 'failed', 'cancelled');
