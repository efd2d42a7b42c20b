-- 0022: v_scaling's per-node baseline is per node *and GPU model*. A node
-- with GPUs of two models (a workstation with a 4090 and an A6000, a node
-- whose GPUs were swapped under one hostname) had one baseline for both:
-- the median over every one-GPU run there, whichever model, so a model's
-- 2-GPU row was measured against the other's speed (an efficiency of 3.3
-- on a review's store). The per-model baseline over every node
-- (multi-node rows without a node baseline) was already per model. The
-- view of 0020 otherwise; its columns as they were.
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
    WINDOW w AS (PARTITION BY node, gpu_model, backend, precision, batch_per_gpu, image_size),
           m AS (PARTITION BY gpu_model, backend, precision, batch_per_gpu, image_size)
),
base AS (  -- per node and model: the middle one, or the mean of the two middle ones
    SELECT node, gpu_model, backend, precision, batch_per_gpu, image_size,
           avg(images_per_sec) AS images_per_sec, max(cnt) AS runs
    FROM one
    WHERE i IN ((cnt + 1) / 2, (cnt + 2) / 2)
    GROUP BY node, gpu_model, backend, precision, batch_per_gpu, image_size
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
           ON b.node = r.node AND b.gpu_model IS r.gpu_model
          AND b.backend IS r.backend AND b.precision IS r.precision
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
