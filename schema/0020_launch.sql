-- 0020: launch (how a data-parallel ResNet-50 job ran its replicas on a
-- node: 'threads' of the worker or 'processes' of their own, docs/
-- data-parallel.md "Replicas as processes") appended to v_results and
-- v_scaling, as 0013 appended bucket_mb. It changes a data-parallel figure
-- (on GPUs a replica process captures its step as a CUDA graph, a thread
-- steps eagerly), and no view had it: a comparison of runs put a run as
-- threads beside one as processes as one configuration.
--   launch: for a resnet50 job with more than one replica per node
--   (jobs.n_gpus, the GPUs of one node) the record's details.launch; else,
--   for an ok record (one stored before the key existed: every such run
--   ran its replicas as threads) 'threads'; else the job's parameter
--   launch; else 'auto' (the default, which the job's parameters leave
--   out). NULL for one replica per node (one GPU, or one GPU on each of
--   several nodes: nothing to launch) and for other kinds.
-- v_scaling's baselines (one-GPU runs, whose launch is NULL) are as they
-- were: a multi-GPU row of either launch is measured against the same
-- one-GPU median. v_models reads v_results' columns, which are kept. The
-- views of 0018 and 0013 otherwise; columns only appended.
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
LEFT JOIN results r ON r.job_id = j.job_id AND r.attempt = j.attempt
LEFT JOIN nodes n ON n.agent_id = a.agent_id
WHERE j.state IN ('done', 'failed', 'cancelled');

DROP VIEW v_scaling;
CREATE VIEW v_scaling AS
WITH runs AS (
    SELECT j.sweep_id, j.job_id, j.attempt, j.finished_at,
           n.name                                                             AS node,
           r.device_model                                                     AS gpu_model,
           r.backend,
           r.precision,
           COALESCE(json_extract(r.record, '$.interconnect'), j.interconnect) AS interconnect,
           j.batch_per_gpu,
           COALESCE(json_extract(r.record, '$.image_size'),
                    json_extract(j.params, '$.image_size'))                   AS image_size,
           COALESCE(json_extract(j.params, '$.n_nodes'), 1)                   AS n_nodes,
           r.n_devices                                                        AS n_gpus,
           r.images_per_sec,
           COALESCE(json_extract(r.record, '$.details.bucket_mb'),
                    json_extract(j.params, '$.bucket_mb'), 25)                AS bucket_mb,
           CASE WHEN j.n_gpus > 1
                THEN COALESCE(json_extract(r.record, '$.details.launch'),
                              CASE WHEN r.record IS NOT NULL AND r.status = 'ok' THEN 'threads' END,
                              json_extract(j.params, '$.launch'), 'auto') END AS launch
    FROM jobs j
    JOIN results r ON r.job_id = j.job_id AND r.attempt = j.attempt
    JOIN attempts a ON a.job_id = j.job_id AND a.attempt = j.attempt
    JOIN nodes n ON n.agent_id = a.agent_id
    WHERE j.kind = 'resnet50' AND j.state = 'done' AND r.status = 'ok' AND r.valid = 1
      AND r.images_per_sec IS NOT NULL AND r.n_devices >= 1
),
one AS (
    SELECT node, gpu_model, backend, precision, batch_per_gpu, image_size, images_per_sec,
           row_number() OVER (w ORDER BY images_per_sec) AS i,
           count(*) OVER w                               AS cnt,  -- the whole group
           row_number() OVER (m ORDER BY images_per_sec) AS mi,
           count(*) OVER m                               AS mcnt
    FROM runs
    WHERE n_gpus = 1 AND n_nodes = 1 AND images_per_sec > 0
    WINDOW w AS (PARTITION BY node, backend, precision, batch_per_gpu, image_size),
           m AS (PARTITION BY gpu_model, backend, precision, batch_per_gpu, image_size)
),
base AS (  -- per node: the middle one, or the mean of the two middle ones
    SELECT node, backend, precision, batch_per_gpu, image_size,
           avg(images_per_sec) AS images_per_sec, max(cnt) AS runs
    FROM one
    WHERE i IN ((cnt + 1) / 2, (cnt + 2) / 2)
    GROUP BY node, backend, precision, batch_per_gpu, image_size
),
base_model AS (  -- per GPU model, over every node
    SELECT gpu_model, backend, precision, batch_per_gpu, image_size,
           avg(images_per_sec) AS images_per_sec, max(mcnt) AS runs
    FROM one
    WHERE mi IN ((mcnt + 1) / 2, (mcnt + 2) / 2)
    GROUP BY gpu_model, backend, precision, batch_per_gpu, image_size
),
chosen AS (
    SELECT r.*,
           CASE WHEN b.images_per_sec > 0 THEN 'node'
                WHEN r.n_nodes > 1 AND m.images_per_sec > 0 THEN 'gpu_model' END AS baseline_scope,
           CASE WHEN b.images_per_sec > 0 THEN b.images_per_sec
                WHEN r.n_nodes > 1 AND m.images_per_sec > 0 THEN m.images_per_sec END AS base_ips,
           CASE WHEN b.images_per_sec > 0 THEN b.runs
                WHEN r.n_nodes > 1 AND m.images_per_sec > 0 THEN m.runs END AS base_runs
    FROM runs r
    LEFT JOIN base b
           ON b.node = r.node AND b.backend IS r.backend AND b.precision IS r.precision
          AND b.batch_per_gpu IS r.batch_per_gpu AND b.image_size IS r.image_size
    LEFT JOIN base_model m
           ON m.gpu_model IS r.gpu_model AND m.backend IS r.backend
          AND m.precision IS r.precision AND m.batch_per_gpu IS r.batch_per_gpu
          AND m.image_size IS r.image_size
)
SELECT c.sweep_id,
       c.job_id,
       c.node,
       COALESCE((SELECT group_concat(name, ',') FROM
                    (SELECT kn.name FROM ranks k JOIN nodes kn ON kn.agent_id = k.agent_id
                     WHERE k.job_id = c.job_id AND k.attempt = c.attempt ORDER BY k.rank)),
                c.node)                                              AS nodes,
       c.n_nodes,
       c.gpu_model,
       c.backend,
       c.precision,
       c.interconnect,
       c.batch_per_gpu,
       c.image_size,
       c.n_gpus,
       c.images_per_sec,
       c.base_ips                                                    AS baseline_images_per_sec,
       c.base_runs                                                   AS baseline_runs,
       c.images_per_sec / c.base_ips                                 AS speedup,
       c.images_per_sec / (c.n_gpus * c.base_ips)                    AS efficiency,
       (SELECT group_concat(transport, ',') FROM v_transports t
        WHERE t.job_id = c.job_id AND t.attempt = c.attempt)         AS nccl_transports,
       c.finished_at,
       c.baseline_scope,
       c.bucket_mb,
       c.launch
FROM chosen c;
