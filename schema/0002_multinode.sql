-- 0002_multinode.sql: multi-node jobs, per-size all-reduce results, the
-- NCCL transports a result reports, and the scaling view (issue 5).
--
-- A multi-node job (jobs.params has "n_nodes" > 1) runs one worker per node,
-- each a *rank*. Its attempts row names rank 0's agent; the ranks table has
-- every rank of every attempt. The job's results row is written once, when
-- every rank has ended: rank 0's record when all ranks succeeded (its
-- figures are the job's: images/s over the global batch, n_devices = every
-- GPU of every node), or the record and error of the rank whose failure
-- ended the attempt. Each rank's own report stays in its ranks row.

-- One row per rank of each attempt of a multi-node job.
CREATE TABLE ranks (
    job_id       INTEGER NOT NULL,
    attempt      INTEGER NOT NULL,
    rank         INTEGER NOT NULL,             -- node rank; rank 0 made the unique id
    agent_id     TEXT NOT NULL REFERENCES nodes (agent_id),
    -- waiting (for rank 0's id), assigned, ready (at the start barrier),
    -- started (the start time was sent), then how the rank ended: done,
    -- failed, timeout, crashed, cancelled, lost (its agent), skipped (the
    -- attempt ended before it was assigned: no worker ever ran)
    state        TEXT NOT NULL
        CHECK (state IN ('waiting', 'assigned', 'ready', 'started', 'done', 'failed', 'timeout',
                         'crashed', 'cancelled', 'lost', 'skipped')),
    placed_at    TEXT NOT NULL,
    assigned_at  TEXT,
    ready_at     TEXT,
    start_at     TEXT,                         -- the start time every rank was given
    ended_at     TEXT,
    error        TEXT,
    -- the worker's own report, when it made one (also after the rank was
    -- given up as lost: a late report is kept, the state is not changed)
    status       TEXT CHECK (status IN ('ok', 'failed', 'timeout', 'crashed', 'cancelled')),
    exit_code    INTEGER,
    output_tail  TEXT,
    record       TEXT,                         -- the rank's result record (JSON)
    worker_started_at  TEXT,
    worker_finished_at TEXT,
    PRIMARY KEY (job_id, attempt, rank),
    UNIQUE (job_id, attempt, agent_id),
    FOREIGN KEY (job_id, attempt) REFERENCES attempts (job_id, attempt)
);

-- Per message size of an allreduce result (record key "sizes"), filled by
-- the trigger below from the record as it is committed.
CREATE TABLE allreduce_sizes (
    job_id     INTEGER NOT NULL,
    attempt    INTEGER NOT NULL,
    idx        INTEGER NOT NULL,               -- position in the record's sizes array
    bytes      INTEGER NOT NULL,
    count      INTEGER,                        -- elements
    time_us    REAL,
    algbw_gbs  REAL,
    busbw_gbs  REAL,                           -- algbw * 2(n-1)/n, as nccl-tests
    ok         INTEGER,                        -- the correctness check after timing passed
    PRIMARY KEY (job_id, attempt, idx),
    FOREIGN KEY (job_id, attempt) REFERENCES results (job_id, attempt)
);

CREATE TRIGGER results_allreduce_sizes AFTER INSERT ON results
WHEN NEW.kind = 'allreduce' AND NEW.record IS NOT NULL
BEGIN
    INSERT INTO allreduce_sizes (job_id, attempt, idx, bytes, count, time_us, algbw_gbs,
                                 busbw_gbs, ok)
    SELECT NEW.job_id, NEW.attempt, s.key,
           json_extract(s.value, '$.bytes'), json_extract(s.value, '$.count'),
           json_extract(s.value, '$.time_us'), json_extract(s.value, '$.algbw_gbs'),
           json_extract(s.value, '$.busbw_gbs'), json_extract(s.value, '$.ok')
    FROM json_each(NEW.record, '$.sizes') AS s
    WHERE json_extract(s.value, '$.bytes') IS NOT NULL;
END;

-- The NCCL transports each result reports (record key
-- details.nccl_transports: an array of names such as "P2P/CUMEM", "SHM",
-- "NET/IB", "NVLS"; an object is read by its keys), one row each.
CREATE VIEW v_transports AS
SELECT r.job_id, r.attempt,
       CASE json_type(r.record, '$.details.nccl_transports')
           WHEN 'object' THEN t.key ELSE t.value END AS transport
FROM results r, json_each(r.record, '$.details.nccl_transports') AS t
WHERE r.record IS NOT NULL
  AND json_type(r.record, '$.details.nccl_transports') IN ('array', 'object');

-- v_results of 0001 with three columns more at the end: n_nodes, nodes
-- (every rank's node, rank 0 first) and nccl_transports (comma-separated,
-- NULL when the result reports none). n_gpus counts every node's GPUs.
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
        WHERE t.job_id = j.job_id AND t.attempt = j.attempt) AS nccl_transports
FROM jobs j
LEFT JOIN attempts a ON a.job_id = j.job_id AND a.attempt = j.attempt
LEFT JOIN results r ON r.job_id = j.job_id AND r.attempt = j.attempt
LEFT JOIN nodes n ON n.agent_id = a.agent_id
WHERE j.state IN ('done', 'failed', 'cancelled');

-- Scaling: one row per valid, successful ResNet-50 result, with its speedup
-- over one GPU and its efficiency:
--   speedup    = images_per_sec / baseline_images_per_sec
--   efficiency = images_per_sec / (n_gpus * baseline_images_per_sec)
-- The baseline is the median images/s of every valid one-GPU, one-node
-- ResNet-50 result on the same node with the same backend, precision,
-- batch per GPU and image size (any sweep; baseline_runs says how many).
-- Without one, baseline, speedup and efficiency are NULL. Invalid results
-- (valid = 0) are neither rows nor baselines. node is rank 0's node for a
-- multi-node job, whose n_gpus counts every node's GPUs. interconnect is
-- what the result record says the run used (the engine's word, never the
-- request); nccl_transports what NCCL reported.
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
           r.images_per_sec
    FROM jobs j
    JOIN results r ON r.job_id = j.job_id AND r.attempt = j.attempt
    JOIN attempts a ON a.job_id = j.job_id AND a.attempt = j.attempt
    JOIN nodes n ON n.agent_id = a.agent_id
    WHERE j.kind = 'resnet50' AND j.state = 'done' AND r.status = 'ok' AND r.valid = 1
      AND r.images_per_sec IS NOT NULL AND r.n_devices >= 1
),
one AS (
    SELECT node, backend, precision, batch_per_gpu, image_size, images_per_sec,
           row_number() OVER (w ORDER BY images_per_sec) AS i,
           count(*) OVER w                               AS cnt  -- the whole group: no ORDER BY
    FROM runs
    WHERE n_gpus = 1 AND n_nodes = 1
    WINDOW w AS (PARTITION BY node, backend, precision, batch_per_gpu, image_size)
),
base AS (
    SELECT node, backend, precision, batch_per_gpu, image_size,
           avg(images_per_sec) AS images_per_sec,  -- the middle one, or the two middle ones
           max(cnt)            AS runs
    FROM one
    WHERE i IN ((cnt + 1) / 2, (cnt + 2) / 2)
    GROUP BY node, backend, precision, batch_per_gpu, image_size
)
SELECT r.sweep_id,
       r.job_id,
       r.node,
       COALESCE((SELECT group_concat(name, ',') FROM
                    (SELECT kn.name FROM ranks k JOIN nodes kn ON kn.agent_id = k.agent_id
                     WHERE k.job_id = r.job_id AND k.attempt = r.attempt ORDER BY k.rank)),
                r.node)                                              AS nodes,
       r.n_nodes,
       r.gpu_model,
       r.backend,
       r.precision,
       r.interconnect,
       r.batch_per_gpu,
       r.image_size,
       r.n_gpus,
       r.images_per_sec,
       b.images_per_sec                                              AS baseline_images_per_sec,
       b.runs                                                        AS baseline_runs,
       r.images_per_sec / NULLIF(b.images_per_sec, 0)                AS speedup,
       r.images_per_sec / NULLIF(r.n_gpus * b.images_per_sec, 0)     AS efficiency,
       (SELECT group_concat(transport, ',') FROM v_transports t
        WHERE t.job_id = r.job_id AND t.attempt = r.attempt)         AS nccl_transports,
       r.finished_at
FROM runs r
LEFT JOIN base b
       ON b.node = r.node AND b.backend IS r.backend AND b.precision IS r.precision
      AND b.batch_per_gpu IS r.batch_per_gpu AND b.image_size IS r.image_size;

-- Per-size all-reduce bus bandwidth of every finished allreduce job, from
-- the attempt that ended it.
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
WHERE j.state IN ('done', 'failed', 'cancelled');

-- Every rank of every multi-node attempt, with its node's name and the
-- wall-clock ms its worker really began the timed work (from its record).
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
       k.ended_at
FROM ranks k
JOIN jobs j ON j.job_id = k.job_id
LEFT JOIN nodes n ON n.agent_id = k.agent_id;
